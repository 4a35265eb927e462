"""Reproduce a study on this lab: its findings (studies/STUDY.yml) planned as campaigns, run until each is decided or
the time is spent, and the verdicts written as a reproduction page.

``platbench reproduce STUDY [--finding ID ...] [--max-time 2h] [--precision P]``: the study's file is read and
checked, the inventory's runner hosts are read for what they offer, and the findings they cannot express are set
apart (reported with what they need, never run). Before any cell, every expressible finding's experiment is planned
and its metric and scenarios checked. Then each campaign runs as ``platbench run --precision`` runs one, in rounds,
until every finding it decides is settled (reproduced, not reproduced, or undecided on its bound within ±P) or its
share of ``--max-time`` is spent; the campaigns still open after a pass share the time the settled ones left, in
further passes. A campaign found in the results already (the same cells) is read, and resumed only where its findings
still need rounds. The page goes to results/reproduce-STUDY-TIME/ (reproduction.txt, .html, .json),
and one row per finding to the results store, which ``platbench history --study STUDY`` reads.

Exit status: 0 every campaign ran (whatever the verdicts), 1 a campaign failed, 2 bad input, 130/143 interrupted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from platbench import decide
from platbench.campaign import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, human
from platbench.reproduce import findings as study_files
from platbench.reproduce import lab as lab_probe
from platbench.reproduce import page, planning, relations

DEFAULT_MAX_TIME = "2h"
DEFAULT_PRECISION = 0.01
SMALLEST_SHARE = 120.0  # seconds: a campaign given less is not started (its first round alone takes about that)
REPO = Path(__file__).resolve().parents[2]


def add_arguments(parser):
    parser.add_argument("study", help=f"a study of studies/ ({', '.join(study_files.available())})")
    parser.add_argument(
        "--finding", action="append", default=[], metavar="ID", help="only this finding (repeatable; default: all)"
    )
    parser.add_argument(
        "--max-time",
        default=DEFAULT_MAX_TIME,
        metavar="DURATION",
        help=f"the whole reproduction's time at most (90s, 30m, 1h30m; default {DEFAULT_MAX_TIME})",
    )
    parser.add_argument(
        "--precision",
        type=float,
        default=DEFAULT_PRECISION,
        metavar="P",
        help="a finding whose interval is within ±P and still straddles its bound is settled as undecided (its "
        f"quantity sits on the bound) instead of taking more rounds (default {DEFAULT_PRECISION})",
    )
    parser.add_argument("--inventory", "-i", default=str(REPO / "inventories" / "local"), help="the lab's inventory")
    parser.add_argument(
        "--results-dir", default=str(REPO / "results"), help="where campaigns and the page go (default: results/)"
    )
    parser.add_argument("--store", help="the results store the verdicts are added to (default: RESULTS_DIR's)")
    parser.add_argument(
        "--plan", action="store_true", help="print the plan (the campaigns, what is not expressible) and stop"
    )
    parser.set_defaults(handler=main)


def prepare(args):
    """``(study, findings, lab, plan, max seconds)``, or StudyError / ValueError naming what was wrong."""
    study = study_files.load(args.study)
    chosen = study_files.selected(study, args.finding)
    max_seconds = decide.parse_duration(args.max_time)
    problem = decide.precision_problem(args.precision)
    if problem:
        raise ValueError(problem)
    lab = lab_probe.probe(args.inventory)
    return study, chosen, lab, planning.plan(chosen, lab, args.results_dir), max_seconds


def plan_lines(study, chosen, lab, plan):
    lines = [
        f"platbench reproduce {study.name}: {len(chosen)} finding(s); {len(chosen) - len(plan.not_expressible)} "
        f"expressible on this lab ({lab.describe()}) in {len(plan.campaigns)} campaign(s)"
    ]
    for campaign in plan.campaigns:
        state = "found in the results, resumed where needed" if campaign.found else "new"
        lines.append(f"  {campaign.name} ({state}): {len(campaign.cells)} cells a pass; {campaign.command()}")
        for finding in campaign.findings:
            lines.append(f"    {finding.id}: {finding.relation.text()} on {finding.metric}; {finding.data['scaled']}")
    for finding, lacking in plan.not_expressible:
        lines.append(f"  not expressible here: {finding.id} needs {', '.join(lacking)}")
    return lines


def _frame(directory):
    from platbench.report.load import ReportError, load_samples

    if not (Path(directory) / "samples.jsonl").is_file():
        return None
    try:
        return load_samples(directory)
    except ReportError:
        return None


MIN_ROUNDS_ADDED = 3  # a pass costs the playbook's start: one of a round or two is mostly that


def rounds_to_ask(needed, rounds):
    """The rounds the next pass adds toward ``needed`` rounds in all, ``rounds`` done: at least MIN_ROUNDS_ADDED, at
    most as many again as are done, so the findings are judged again on the way. A few noisy first rounds can ask
    for hundreds more; 34 rounds of the same cells may settle the finding long before."""
    return max(MIN_ROUNDS_ADDED, min(needed - rounds, rounds))


def _rounds_held(directory):
    """The rounds the campaign in ``directory`` has measured cells of (0 for none)."""
    frame = _frame(directory)
    if frame is None or "repeat" not in frame.columns:
        return 0
    return int(frame["repeat"].dropna().nunique())


def judge_for(campaign, precision):
    """The run's judge (run._until_decided): a decide.State of the campaign's findings, and its progress line."""
    from platbench.answer import seconds_per_round

    def judge(directory):
        frame = _frame(directory)
        if frame is None:
            return decide.State(None, "", 0, None, False, None, None), "no samples yet"
        outcomes = [(finding, relations.evaluate(finding, frame, precision)) for finding in campaign.findings]
        rounds = int(frame["repeat"].dropna().nunique()) if "repeat" in frame.columns else 0
        open_ones = [(finding, outcome) for finding, outcome in outcomes if not outcome.settled]
        more = None
        if open_ones and all(outcome.rounds_needed is not None for _, outcome in open_ones):
            more = rounds_to_ask(max(outcome.rounds_needed for _, outcome in open_ones), rounds)
        state = decide.State(None, "", rounds, more, not open_ones, None, seconds_per_round(frame))
        line = f"{rounds} round(s): {len(outcomes) - len(open_ones)} of {len(outcomes)} finding(s) settled"
        for finding, outcome in outcomes:
            line += f"; {finding.id} {outcome.verdict}"
            if outcome.measurements and len(outcome.measurements) == 1:
                item = outcome.measurements[0]
                line += f" ({page.interval_text(item.estimate, item.interval)})"
        if more:
            line += f"; about {more} round(s) more wanted"
        return state, line

    return judge


def run_campaign(campaign, seconds, args, out, err):
    """Run ``campaign`` as ``platbench run --precision`` would, judged by its findings, for at most ``seconds``."""
    from platbench import run

    argv = [campaign.experiment, "--campaign", campaign.name, "--set", f"platforms=[{','.join(campaign.platforms)}]"]
    argv += ["--size", campaign.size] if campaign.size else []
    # A campaign resumed starts at the rounds it holds: passes that would only find its rounds measured cost the
    # playbook's start each.
    planned = campaign.repeats or len({cell["labels"].get("repeat", 0) for cell in campaign.cells})
    held = _rounds_held(Path(args.results_dir) / campaign.name)
    argv += ["--repeats", str(max(planned, held))]
    for setting in campaign.settings:
        argv += ["--set", setting]
    argv += ["--inventory", args.inventory, "--results-dir", args.results_dir]
    argv += ["--precision", str(args.precision), "--max-time", f"{int(seconds)}s"]
    parser = argparse.ArgumentParser(prog="platbench run")
    run.add_arguments(parser)
    run_args = parser.parse_args(argv)
    run_args.argv = argv
    run_args.judge = judge_for(campaign, args.precision)
    return run.main(run_args, out, err)


def standing(campaign, args):
    """``(settled, rounds, line)`` of ``campaign`` in the results: whether every finding it decides is settled, the
    rounds it holds, and the judge's line. The samples are read once."""
    state, line = judge_for(campaign, args.precision)(Path(args.results_dir) / campaign.name)
    return state.precise, state.rounds, line


def run_until_settled(campaigns, seconds, stand, run_one, out, clock=time.monotonic):
    """Run ``campaigns`` in passes within ``seconds``; the exit status (EXIT_OK, EXIT_FAILED, or an interrupt's).

    In a pass each open campaign gets the time left over the open campaigns left in the pass, so what one does not
    use goes to the next. A campaign that settles early leaves its time to the others: the next pass shares what is
    left among the campaigns still open, and passes go on until none is open or a share would be below
    SMALLEST_SHARE. A campaign that failed, or whose pass added no round, is not run again (another pass would spend
    the time the same way). ``stand(campaign)`` is ``(settled, rounds, line)`` as ``standing`` gives it;
    ``run_one(campaign, seconds)`` runs it and returns its exit status."""
    deadline = clock() + seconds
    code = EXIT_OK
    open_ones, held = [], {}  # held: each campaign's rounds as last read, so a pass reads its samples once
    for campaign in campaigns:
        settled, held[campaign.name], line = stand(campaign)
        if settled:
            print(f"{campaign.name}: already settled in the results ({line}): not run again", file=out)
        else:
            open_ones.append(campaign)
    passes = 0
    while open_ones:
        passes += 1
        still_open = []
        for index, campaign in enumerate(open_ones):
            share = (deadline - clock()) / (len(open_ones) - index)
            if share < SMALLEST_SHARE:
                print(f"{campaign.name}: not run, {human(max(share, 0))} of --max-time left for it", file=out)
                continue
            again = f"pass {passes}, " if passes > 1 else ""
            print(f"{campaign.name}: {again}running for at most {human(share)}", file=out, flush=True)
            result = run_one(campaign, share)
            if result in (EXIT_INTERRUPTED, 143):
                return result
            if result != EXIT_OK:
                code = EXIT_FAILED
                continue
            before = held[campaign.name]
            settled, held[campaign.name], _ = stand(campaign)
            if settled:
                continue
            if held[campaign.name] <= before:
                print(f"{campaign.name}: the pass added no round: not run again", file=out)
                continue
            still_open.append(campaign)
        open_ones = still_open
    return code


def entries_of(study, chosen, plan, results_dir, precision, frames):
    """The page's entries, every chosen finding in the file's order."""
    from platbench.answer import seconds_per_round

    lacking = {finding.id: lacks for finding, lacks in plan.not_expressible}
    campaign_of = {finding.id: campaign for campaign in plan.campaigns for finding in campaign.findings}
    entries = []
    for finding in chosen:
        if finding.id in lacking:
            entries.append(page.Entry(finding, relations.NOT_EXPRESSIBLE, None, lacking[finding.id], None, None))
            continue
        campaign = campaign_of[finding.id]
        frame = frames.get(campaign.name)
        if frame is None:
            entries.append(page.Entry(finding, relations.UNDECIDED, None, [], campaign.name, None))
            continue
        outcome = relations.evaluate(finding, frame, precision)
        entries.append(page.Entry(finding, outcome.verdict, outcome, [], campaign.name, seconds_per_round(frame)))
    return entries


def main(args, out=None, err=None):
    """``platbench reproduce``: the exit status (see the module's docstring)."""
    out, err = out or sys.stdout, err or sys.stderr
    started_at, started = time.time(), time.monotonic()
    try:
        study, chosen, lab, plan, max_seconds = prepare(args)
    except (study_files.StudyError, ValueError) as exc:
        print(exc, file=err)
        return EXIT_BAD_INPUT
    print("\n".join(plan_lines(study, chosen, lab, plan)), file=out, flush=True)
    if args.plan:
        return EXIT_OK
    code = run_until_settled(
        plan.campaigns,
        max_seconds - (time.monotonic() - started),
        lambda campaign: standing(campaign, args),
        lambda campaign, seconds: run_campaign(campaign, seconds, args, out, err),
        out,
    )
    if code in (EXIT_INTERRUPTED, 143):
        return code
    frames = {campaign.name: _frame(Path(args.results_dir) / campaign.name) for campaign in plan.campaigns}
    frames = {name: frame for name, frame in frames.items() if frame is not None}
    entries = entries_of(study, chosen, plan, args.results_dir, args.precision, frames)
    spent = time.monotonic() - started
    reproduction = {
        "study": study,
        "entries": entries,
        "lab": lab.describe(),
        "when": time.strftime("%Y-%m-%d %H:%M", time.localtime(started_at)),
        "spent": f"{human(spent)} of --max-time {human(max_seconds)}",
    }
    name = f"reproduce-{study.name}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(started_at))}"
    directory = Path(args.results_dir) / name
    text = page.write(directory, reproduction, frames)
    print(text, file=out)
    try:
        from platbench import store

        location = args.store or store.location_of(None, args.results_dir)
        store.record_findings(location, name, started_at, page.as_json(reproduction))
        print(f"verdicts added to the store {store.shown(location)} (platbench history --study {study.name})", file=out)
    except store.StoreError as exc:
        print(f"warning: the verdicts are not in the store: {exc}", file=err)
    print(f"the page: {directory / page.HTML}", file=out)
    return code
