# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""A duet pair's two cell plans (schedule: duet) as roles/platform_run/tasks/duet.yml runs them: what each side is
for platbench.lab.duet_run (a process's shell line, or a created container), and what each side's record gets
from the pair's run, in the shape of its kind's own task result (placements/process/ and container.py read them).

Only the kinds that declare ``duet`` (placements.DUET) get here: a process on the runner host, a container of its
engine.

A side's output that holds no valid record line (``start --attach`` lost it) takes the line of the side's record file
(its plan's ``record_file``, which duet_run read back), and ``duet.record_from`` says where the record was read:
``stream`` or ``file``.
"""

from __future__ import annotations

from ansible_collections.platbench.lab.plugins.plugin_utils import placements
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import (
    RESULT_PREFIX,
    RecordError,
    parse_result_lines,
)


class DuetPlanError(Exception):
    """A plan that cannot be one side of a duet pair."""


def sides(plans):
    """One entry per plan: ``{"cell", "engine", "run", "plan"}``; ``engine`` is the container side's engine (the
    registry's: docker or podman), None for a process side; ``run`` the side as platbench.lab.duet_run takes it."""
    entries = []
    for plan in plans:
        if plan.get("process"):
            engine, run = None, {"command": plan["process"]["command"]}
            if plan["process"].get("cgroup"):  # duet_run makes it before the sides start, and removes it after
                run["cgroup"] = {
                    name: plan["process"]["cgroup"][name] for name in ("path", "version", "quota_us", "period_us")
                }
        elif plan.get("container"):
            engine = plan["container"]["engine"]
            run = {"container": {"engine": engine, "name": plan["container"]["name"]}}
        else:
            raise DuetPlanError(
                f"cell {plan.get('cell')}: only a process's or a container's cells run as a duet pair "
                f"({', '.join(placements.DUET)}), not this one's placement {plan.get('placement')!r}"
            )
        if plan.get("record_file"):
            run["record_file"] = plan["record_file"]
        entries.append({"cell": plan.get("cell"), "engine": engine, "run": run, "plan": plan})
    return entries


def _holds_a_record(text):
    """Whether ``text`` holds a record line and every record line of it is valid."""
    try:
        return bool(parse_result_lines(text))
    except RecordError:
        return False


def _without_record_lines(text):
    return "".join(line + "\n" for line in text.splitlines() if not line.strip().startswith(RESULT_PREFIX))


def with_file_record(outcome):
    """``(outcome, record_from)``: a side's duet_run result, its output's record lines replaced by its record file's
    line where its output holds no valid one and the file does; ``record_from`` is ``stream`` or ``file``, None where
    neither holds a record (the record then fails with what the output holds)."""
    stdout, stderr = outcome.get("stdout", ""), outcome.get("stderr", "")
    if _holds_a_record(f"{stdout}\n{stderr}"):
        return outcome, "stream"
    text = outcome.get("record_text")
    if not text or not _holds_a_record(text):
        return outcome, None
    # A line cut short on the way out would fail the record beside the file's whole one: it goes.
    stdout = _without_record_lines(stdout) + text.strip() + "\n"
    return {**outcome, "stdout": stdout, "stderr": _without_record_lines(stderr)}, "file"


def inspected(infos):
    """{container name: the engine's inspect of it} from the registered loop results of docker_container_info
    (``container``) and podman_container_info (``containers``, a list), each with its ``item`` (a side)."""
    found = {}
    for info in infos or []:
        name = (((info.get("item") or {}).get("plan") or {}).get("container") or {}).get("name")
        container = info.get("container") or next(iter(info.get("containers") or []), None)
        if name and container:
            found[name] = container
    return found


def results(pair_sides, run, infos=None):
    """What each side's record reads, in order: ``{"results", "duet"}``, ``results`` being ``{"process": ...}``
    (the raw task's rc, stdout, stderr) or ``{"container": ...}`` (docker_container's ``container`` and ``status``;
    podman_container's ``container``, ``stdout``, ``stderr``), from ``run`` (platbench.lab.duet_run's result, whose
    container sides hold their engine's inspect) and ``infos`` (inspects by the engines' info modules, as
    ``inspected`` takes them, which win where a play has them); ``duet``: what the record says of
    the pair, and where the side's record was read (``record_from``, for a side with a record file)."""
    infos = inspected(infos)
    outcomes = run.get("sides") or []
    overlap = run.get("overlap_seconds")
    started = [outcome.get("started") for outcome in outcomes if outcome.get("started") is not None]
    skew = round(max(started) - min(started), 3) if len(started) == len(pair_sides) and started else None
    found = []
    for index, side in enumerate(pair_sides):
        outcome, record_from = with_file_record(outcomes[index]) if index < len(outcomes) else ({}, None)
        duet = {
            "partner": pair_sides[1 - index]["cell"] if len(pair_sides) == 2 else None,
            "cpus": side["plan"].get("cpuset") or None,
            "overlap_seconds": round(overlap, 3) if isinstance(overlap, (int, float)) else None,
            "start_skew_seconds": skew,
            "timed_out": outcome.get("timed_out"),
        }
        if side["run"].get("record_file"):
            duet["record_from"] = record_from
        if side["engine"] is None:
            process = {key: outcome[key] for key in ("rc", "stdout", "stderr") if key in outcome}
            found.append({"results": {"process": process}, "duet": duet})
            continue
        inspect = dict(infos.get(side["run"]["container"]["name"]) or outcome.get("inspect") or {})
        output = outcome.get("stdout", "") + outcome.get("stderr", "")
        if side["engine"] == "docker":
            container = {"container": {**inspect, "Output": output}, "status": outcome.get("rc")}
        else:
            container = {"container": inspect, "stdout": outcome.get("stdout", ""), "stderr": outcome.get("stderr", "")}
        found.append({"results": {"container": container if outcome else {}}, "duet": duet})
    return found
