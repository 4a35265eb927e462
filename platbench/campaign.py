"""A campaign as ``platbench run`` follows it: fed ansible-runner's events of ``playbooks/experiment.yml``, it
knows the cells each runner host chose, which one runs, how long each took, the time left, and how it ended.

What it reads of the playbook (nothing else, task names least of all):

- the ``set_fact`` results holding ``platform_run_check`` (per runner host: ``skipped`` = {platform: reason},
  ``problems``) and ``platform_run_selection`` (per host: ``cells``, in run order, and ``done``, the cells the
  campaign already holds);
- each ``platbench.lab.record_cell`` result: ``platbench_cell``, ``platbench_status`` (ok, failed, skipped),
  ``platbench_error``, ``platbench_campaign.results_dir``. A host runs its cells one after the other in
  selection order, so its running cell is the one after its last recorded cell, started when that record
  (or the selection) came;
- failed tasks that no cell record follows (the playbook's own failures) and the end of the playbook.

ansible-runner hands over a result bigger than its MAX_EVENT_RES as {} (platbench run raises that limit, but
results may outgrow any limit): a cell is also taken as recorded when its samples appear in the campaign's file,
which the results callback appends to before the next cell starts (``observe``: fed what this run appended).
The file is what counts: the summary and the exit status never call a measured cell missing.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import statistics
import time
from collections import Counter
from dataclasses import dataclass

from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import FAILED_METRIC, SKIPPED_METRIC

RECORD_ACTION = "platbench.lab.record_cell"
CHECK_FACT = "platform_run_check"
SELECTION_FACT = "platform_run_selection"
SAMPLES_FILE = "samples.jsonl"
FAILED_LINES = 5  # lines of a failed task's message shown
LINE_CHARS = 300
# Ansible's wrapping of a lookup's error, in front of the message that matters.
_LOOKUP_WRAPPING = re.compile(r"^.*?The lookup plugin '[^']+' failed: ", re.S)

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


def kind_of(platform):
    """The platform registry's kind of ``platform`` (process, container, guest...), None when unknown."""
    entry = platforms.BY_LABEL.get(platform)
    return entry.kind if entry else None


def first_line(text):
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    return lines[0][:LINE_CHARS] if lines else "no message"


def human(seconds):
    """``42 s``, ``4 min``, ``2 h 05 min``; ``?`` when unknown."""
    if seconds is None:
        return "?"
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes:02d} min"


@dataclass
class CellResult:
    """One recorded cell of this run."""

    id: str
    host: str
    platform: str
    status: str
    error: str | None
    seconds: float | None
    position: int  # its number in the campaign, 1-based


class _Host:
    """What one runner host did so far."""

    def __init__(self):
        self.check = None  # platform_run_check
        self.cells = None  # platform_run_selection.cells; None until chosen
        self.done = 0  # cells the campaign held before this run
        self.finished = 0  # cells of `cells` up to the last one recorded in this run
        self.recorded = set()  # ids of the cells recorded in this run
        self.started = None  # when the running cell started (event time)
        self.failure = None  # (task, message) of a failed task no cell record followed

    def running(self):
        if self.cells is None or self.finished >= len(self.cells):
            return None
        return self.cells[self.finished]


class Campaign:
    """Feed it ansible-runner's events (``feed``); ask it what runs, the time left and how it ended."""

    def __init__(self, name, planned=(), samples_path=None, clock=time.time):
        """``planned``: the plan's cells (to count what a skipped platform leaves out); ``samples_path``: the
        campaign's samples file, until a record names it."""
        self.name = name
        self.planned = Counter(cell["labels"]["platform"] for cell in planned)
        self.samples_path = samples_path
        self.hosts = {}
        self.results = []  # CellResult, in the order recorded
        self.pid = None  # ansible-playbook's, from its events
        self.ended = False
        self._clock = clock
        self._on_disk = {}  # (host label, cell id) -> its samples this run appended to the campaign's file

    # -- events ---------------------------------------------------------------------------------------------

    def feed(self, event):
        """Take one ansible-runner event; return the lines it is worth printing for good (a finished cell, a
        platform skipped, the cells a host will run)."""
        if self.pid is None and event.get("pid"):
            self.pid = event["pid"]
        kind = event.get("event")
        data = event.get("event_data") or {}
        res = data.get("res") if isinstance(data.get("res"), dict) else {}
        if kind == "playbook_on_stats":
            self.ended = True
            return []
        if kind in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
            self._host(data).failure = (data.get("task") or "?", failure_message(res))
            return []
        if kind != "runner_on_ok":
            return []
        when = self._when(event)
        facts = res.get("ansible_facts") or {}
        lines = []
        if isinstance(facts.get(CHECK_FACT), dict):
            lines += self._checked(data["host"], facts[CHECK_FACT])
        if isinstance(facts.get(SELECTION_FACT), dict):
            lines += self._selected(data["host"], facts[SELECTION_FACT], when)
        if data.get("task_action") == RECORD_ACTION and isinstance(res.get("platbench_cell"), dict):
            lines += self._recorded_event(data["host"], res, when)
        return lines

    def _host(self, data):
        return self.hosts.setdefault(data.get("host") or "?", _Host())

    def _when(self, event):
        created = event.get("created")
        if created:
            try:
                return datetime.datetime.fromisoformat(created).timestamp()
            except ValueError:
                pass
        return self._clock()

    def _checked(self, host, check):
        """The host's precheck: what its relative scale-ups became and its NUMA warning (sizing), then the
        platforms it skips."""
        self.hosts.setdefault(host, _Host()).check = check
        lines = [str(message) for message in check.get("sizing") or []]  # each names its host and experiment
        skipped = (check.get("skipped") or {}).items()
        return lines + [f"skipping {label} on {host}: {reason}" for label, reason in skipped]

    def _selected(self, host, selection, when):
        state = self.hosts.setdefault(host, _Host())
        state.cells, state.done = list(selection.get("cells") or []), int(selection.get("done") or 0)
        state.finished, state.started, state.recorded = 0, when, set()
        before = f", {state.done} already measured" if state.done else ""
        return [f"{host}: {len(state.cells)} cells to run{before}"] + self._from_disk(when)

    def _recorded_event(self, host, res, when):
        status = res.get("platbench_status") or "failed"
        skipped = _skip_reason(res.get("platbench_samples")) if status == "skipped" else None
        results_dir = (res.get("platbench_campaign") or {}).get("results_dir")
        if results_dir:
            self.samples_path = f"{results_dir}/{SAMPLES_FILE}"
        return self._recorded(
            host, res["platbench_cell"].get("id"), status, res.get("platbench_error") or skipped, when
        )

    def observe(self, samples, when=None):
        """Take the ``samples`` this run appended to the campaign's file since the last call: a chosen cell
        whose samples are there is recorded, its record event come or not. Returns the lines to print."""
        for sample in samples:
            labels = sample.get("labels") or {}
            self._on_disk.setdefault((labels.get("host"), labels.get("cell")), []).append(sample)
        return self._from_disk(self._clock() if when is None else when)

    def _from_disk(self, when):
        lines = []
        for host, state in self.hosts.items():
            for cell in state.cells or []:
                own = self._on_disk.get((host, cell["id"])) or self._on_disk.get((None, cell["id"]))
                if own and cell["id"] not in state.recorded:
                    lines += self._recorded(host, cell["id"], *_outcome_of(own), when)
        return lines

    def _recorded(self, host, cell_id, status, error, when):
        """A cell recorded, by its event or its samples, whichever comes first; the line to print."""
        state = self.hosts.setdefault(host, _Host())
        if cell_id in state.recorded:
            return []
        ids = [item["id"] for item in state.cells or []]
        if cell_id in ids[state.finished :]:
            state.finished = ids.index(cell_id, state.finished) + 1
            platform = state.cells[state.finished - 1]["labels"]["platform"]
        else:
            state.finished, platform = state.finished + 1, cell_id.split("/", 1)[0]
        seconds = when - state.started if state.started is not None else None
        state.started, state.failure = when, None
        state.recorded.add(cell_id)
        result = CellResult(cell_id, host, platform, status, error, seconds, self.done_before + len(self.results) + 1)
        self.results.append(result)
        took = f" {result.seconds:.1f} s" if result.seconds is not None else ""
        if _is_duet_partner(state.cells, cell_id):
            took = " (ran beside the cell before: a duet pair)"  # recorded right after its lead
        where = f"[{result.position}/{self.total}] {result.id}{self._on(host)}"
        return [f"{where} {status}{took}, ETA {human(self.eta(when))}"]

    def _on(self, host):
        return f" on {host}" if len(self.hosts) > 1 else ""

    # -- where it stands ------------------------------------------------------------------------------------

    @property
    def done_before(self):
        """Cells the campaign held before this run (on the hosts that chose theirs)."""
        return sum(state.done for state in self.hosts.values())

    @property
    def total(self):
        """Cells of the campaign on the hosts that chose theirs: held before, and to run now."""
        return sum(state.done + len(state.cells) for state in self.hosts.values() if state.cells is not None)

    @property
    def finished(self):
        return self.done_before + len(self.results)

    def running(self, now=None):
        """``[(position, cell id, host, seconds running)]`` of the cells running now, one per host at most."""
        now = self._clock() if now is None else now
        rows, position = [], self.finished
        for host, state in self.hosts.items():
            cell = state.running()
            if cell is not None and state.started is not None:
                position += 1
                rows.append((position, cell["id"], host, max(0.0, now - state.started)))
        return rows

    def eta(self, now=None):
        """Seconds left: per host, the mean duration of this run's finished cells of each cell's platform kind
        (the overall mean for a kind none finished yet) for each cell left, less the time its running cell has
        run; the longest host's. None before any cell finished; 0 when nothing is left."""
        now = self._clock() if now is None else now
        durations = {}
        for result in self.results:
            if result.seconds is not None:
                durations.setdefault(kind_of(result.platform), []).append(result.seconds)
        every = [seconds for values in durations.values() for seconds in values]
        overall = statistics.fmean(every) if every else None
        means = {kind: statistics.fmean(values) for kind, values in durations.items()}
        longest = 0.0
        for state in self.hosts.values():
            left = (state.cells or [])[state.finished :]
            if not left:
                continue
            if overall is None:
                return None
            seconds = 0.0
            for index, cell in enumerate(left):
                mean = means.get(kind_of(cell["labels"]["platform"]), overall)
                if index == 0 and state.started is not None:
                    mean = max(0.0, mean - (now - state.started))
                seconds += mean
            longest = max(longest, seconds)
        return longest

    def only_emulated_left(self):
        """True once every host chose its cells, every cell left (the running one too) is an emulated guest's
        (the plan orders them last), and a cell of this run ended ok: the comparable cells' table is ready."""
        if not self.hosts or any(state.cells is None for state in self.hosts.values()):
            return False
        left = self._left()
        return (
            bool(left)
            and all(cell["labels"].get("emulated") for cell in left)
            and any(result.status == "ok" for result in self.results)
        )

    def cells_left(self):
        return len(self._left())

    def _left(self):
        """The chosen cells not finished yet, the running ones first, over every host."""
        return [cell for state in self.hosts.values() for cell in (state.cells or [])[state.finished :]]

    # -- how it ended ---------------------------------------------------------------------------------------

    def problems(self):
        """The prechecks' problems of every host, each once."""
        found = [problem for state in self.hosts.values() for problem in ((state.check or {}).get("problems") or [])]
        return list(dict.fromkeys(found))

    def skipped_platforms(self):
        """``[(platform, host, reason)]`` the prechecks skipped."""
        return [
            (label, host, reason)
            for host, state in self.hosts.items()
            for label, reason in ((state.check or {}).get("skipped") or {}).items()
        ]

    def outcome(self, rc, output_tail=""):
        """``(exit code, lines)`` once the playbook has ended with ``rc``: 0 when every cell of the plan ran ok
        (or was skipped by design: a skipped sample is no failure) or the campaign already had them all; 1 when
        a cell failed or the playbook did; 2 when the prechecks refused the plan or no host can run any of its
        cells. ``output_tail``: the end of Ansible's output, shown when a failure left no message of its own."""
        if rc != 0:
            if self.problems():
                return EXIT_BAD_INPUT, self.problems()
            return EXIT_FAILED, self._playbook_failure(rc, output_tail) + self.summary()
        chosen = [state for state in self.hosts.values() if state.cells is not None]
        if not chosen:
            lines = ["the playbook ended without choosing the cells to run (no runner host in the inventory?)"]
            return EXIT_FAILED, lines + _tail_lines(output_tail)
        if self.total == 0:
            lines = ["no host can run any planned cell:"] + [
                f"  {label} on {host}: {reason}" for label, host, reason in self.skipped_platforms()
            ]
            return EXIT_BAD_INPUT, lines if len(lines) > 1 else lines + ["  no runner host got a cell of the plan"]
        failed = any(result.status == "failed" for result in self.results)
        return (EXIT_FAILED if failed or self.unrecorded() else EXIT_OK), self.summary()

    def unrecorded(self):
        """``[(cell id, host)]`` chosen but never recorded (the playbook ended before them)."""
        return [
            (cell["id"], host)
            for host, state in self.hosts.items()
            for cell in state.cells or []
            if cell["id"] not in state.recorded
        ]

    def _playbook_failure(self, rc, output_tail):
        failures = [(host, state.failure) for host, state in self.hosts.items() if state.failure]
        if not failures:
            return [f"the playbook failed (ansible-playbook exited with {rc}):"] + _tail_lines(output_tail)
        lines = ["the playbook failed:"]
        for host, (task, message) in failures:
            lines.append(f"  {host}, task '{task}':")
            lines += [f"    {line}" for line in message]
        return lines

    def summary(self):
        """The closing lines: counts, each failed cell with its error's first line, what was skipped and why,
        and where the samples are."""
        counts = Counter(result.status for result in self.results)
        if not self.results and not self.unrecorded() and self.done_before:
            head = f"campaign {self.name}: nothing left to run, its {self.done_before} cells were measured before"
        else:
            before = f"; {self.done_before} measured before" if self.done_before else ""
            head = (
                f"campaign {self.name}: {counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} skipped "
                f"of {len(self.results)} cells run{before}"
            )
        lines = [head]
        failed = [result for result in self.results if result.status == "failed"]
        if failed:
            lines.append("failed:")
            lines += [f"  {result.id} on {result.host}: {first_line(result.error)}" for result in failed]
        if self.unrecorded():
            lines.append("not run (the playbook stopped first):")
            lines += [f"  {cell} on {host}" for cell, host in self.unrecorded()]
        skipped = [result for result in self.results if result.status == "skipped"]
        platforms_skipped = self.skipped_platforms()
        if skipped or platforms_skipped:
            lines.append("skipped:")
            for label, host, reason in platforms_skipped:
                count = f" ({self.planned[label]} cells of the plan)" if self.planned.get(label) else ""
                lines.append(f"  {label} on {host}{count}: {first_line(reason)}")
            lines += [f"  {result.id} on {result.host}: {first_line(result.error)}" for result in skipped]
        if self.samples_path:
            lines.append(f"samples: {self.samples_path}")
        return lines


def _skip_reason(samples):
    samples = samples or []
    metadata = (samples[0].get("metadata") or {}) if samples and isinstance(samples[0], dict) else {}
    return metadata.get("reason")


def failure_message(res):
    """The first lines of a failed task's message: its ``msg`` (Ansible's wrapping of a lookup's error taken
    off), the first failed item's of a loop, and the end of its stderr."""
    if not isinstance(res, dict):
        return [first_line(res)]
    items = [item for item in res.get("results") or [] if isinstance(item, dict) and item.get("failed")]
    source = items[0] if items else res
    text = _LOOKUP_WRAPPING.sub("", str(source.get("msg") or ""))
    stderr = str(source.get("stderr") or "").strip()
    lines = [line.rstrip()[:LINE_CHARS] for line in text.splitlines() if line.strip()]
    lines += [line.rstrip()[:LINE_CHARS] for line in stderr.splitlines()[-FAILED_LINES:] if line.strip()]
    return lines[:FAILED_LINES] or ["no message"]


def _tail_lines(text, count=FAILED_LINES * 2):
    return [f"  {line.rstrip()[:LINE_CHARS]}" for line in str(text or "").splitlines() if line.strip()][-count:]


def _outcome_of(samples):
    """``(status, error)`` of a cell from its samples, as record_cell decided it: one ``failed`` sample with
    its error, only ``skipped`` ones with their reason, or measurements."""
    failed = [sample for sample in samples if sample.get("metric") == FAILED_METRIC]
    if failed:
        return "failed", (failed[0].get("metadata") or {}).get("error")
    if all(sample.get("metric") == SKIPPED_METRIC for sample in samples):
        return "skipped", _skip_reason(samples)
    return "ok", None


class SamplesTail:
    """The samples appended to a file from the size it had when this was made: ``new()`` gives those
    appended since the last call, whole lines only (a line still being written waits for the next call; one
    that does not decode is left out)."""

    def __init__(self, path):
        self.path = path
        try:
            self.offset = os.path.getsize(path)
        except OSError:
            self.offset = 0
        self._partial = b""

    def new(self):
        try:
            with open(self.path, "rb") as stream:
                stream.seek(self.offset)
                data = stream.read()
        except OSError:
            return []
        self.offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        samples = []
        for line in lines:
            try:
                sample = json.loads(line.decode("utf-8", errors="replace"))
            except ValueError:
                continue
            if isinstance(sample, dict):
                samples.append(sample)
        return samples


def _is_duet_partner(cells, cell_id):
    """Whether ``cell_id`` is a duet pair's partner (schedule: duet), which runs beside the lead recorded before it."""
    cell = next((cell for cell in cells or [] if cell.get("id") == cell_id), None)
    return bool(cell) and (cell.get("labels") or {}).get("duet_role") == "partner"
