"""The report's summary tables: one row per scenario and parameter combination with each metric's mean, std,
cv and ratio to bm (``summarize``), the bm row each row is compared with, and their rendering as text, markdown
and CSV frames, with the notes that follow a table (noise mark, emulated guests, skipped, INVALID and scaled-down
cells).
The cell helpers (``key_cells``, ``measure_cell``...) are the ones every table of the report uses."""

import math

import numpy
import pandas as pd

# platbench/__init__.py has put the platbench.lab collection on the import path.
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import inject
from ansible_collections.platbench.lab.plugins.plugin_utils.records.records import (
    FAILED_METRIC,
    OUTCOME_METRICS,
    SKIPPED_METRIC,
)

from platbench import validity
from platbench.report.load import (
    ACCELERATOR,
    BASELINE,
    HOST,
    INVALID,
    LOADGEN_REASONS,
    LOADGEN_RESULT,
    LOADGEN_SPEED,
    LOADGEN_STATES,
    SAMPLE_TIME,
    SCALED_DOWN,
    SCENARIO_LABELS,
    SKIP_REASON,
    VALID,
    WORKLOAD,
    host_keys,
    is_emulated,
    measured,
    platform_rank,
    varying_labels,
    workload_keys,
)
from platbench.report.stats import (
    blocks_on_sides,
    coefficient_of_variation,
    mean,
    mean_interval,
    paired_ratio_interval,
    pairs_needed,
    ratio,
    ratio_interval,
    sample_std,
)

NOT_AVAILABLE = "n/a"  # the cell of a missing value or label
NO_ACCELERATOR = "-"  # the accelerator cell of a row without one (bare metal)
# The notes after a table, each printed only where a row needs it.
NOISE_MARK = "~"
NOISE_NOTE = (
    f"{NOISE_MARK}: the ratio to bm's 95% confidence interval holds 1 (Student's t on the log-ratios, paired by round "
    "in a rounds campaign and by duet pair in a duet one; Welch's t over the repeats otherwise): it cannot be told "
    "from noise. More rounds (platbench run --precision) or a quieter host may resolve it."
)
# The column of the rounds (repeats) a rounds campaign pairs its platforms by (plugin_utils/experiment/schedule.py).
ROUND = "repeat"
SCHEDULE = "schedule"
# The pair a duet campaign's cell ran in (schedule.DUET_PAIR: the lead's id, on both sides).
DUET_PAIR = "duet_pair"
# The CPU set a duet cell ran on (schedule.DUET_SIDE, 0 or 1), swapped every pair: the block of the analysis.
DUET_SIDE = "duet_side"
IN_DUET = "in duet pairs"  # a summary row's own field: every cell of it ran in a duet pair
PAIRED = "paired by round (t on log-ratios)"
DUET_PAIRED = "paired by duet pair, blocked on the swapped CPU sets (t on log-ratios)"
# A duet comparison whose CPU sets are not known, or hold fewer than two pairs each: not blocked (report_stats).
DUET_PAIRED_UNBLOCKED = "paired by duet pair (t on log-ratios; fewer than two pairs on a CPU set to block on)"
PAIRED_METHODS = (PAIRED, DUET_PAIRED, DUET_PAIRED_UNBLOCKED)
UNPAIRED = "unpaired (Welch's t over the repeats)"
# Metrics both sides of a duet pair measure alike by design: each side times the same window (the pair's start line,
# then the same seconds of steps), so their ratio is 1 whatever the platforms do. Their ratio is never shown.
SAME_WINDOW_METRICS = ("elapsed",)
SAME_WINDOW = "both sides of a duet pair time the same window, so it is not compared"
NOT_COMPARED = "not compared"  # the cell of such a ratio
DUET_NOTE = (
    "duet: both sides of a pair ran at the same time on disjoint cores of one NUMA node, sharing the host's caches "
    "and memory bandwidth; a duet ratio is the difference between the platforms, not their speed alone, and a duet "
    "row's own figures are not those of the platform running alone."
)
EMULATED_NOTE = (
    "tcg: emulated guest (QEMU TCG, no KVM on this host): functional only, 10-200x slower than "
    "hardware; left out of the ratios to bm (--include-emulated shows them)."
)
EMULATED_INCLUDED_NOTE = (
    "tcg: emulated guest (QEMU TCG, no KVM on this host): functional only, 10-200x slower "
    "than hardware; its ratios to bm are shown because of --include-emulated."
)
SKIPPED_TITLE = "skipped: {cells} cell(s) could not measure here by design (no failure, no figures):"
INVALID_TITLE = (
    f"{INVALID}: {{cells}} cell(s) that MLPerf loadgen called {INVALID}: their times are measured, but no figure "
    f"of theirs is a valid MLPerf result ({LOADGEN_SPEED} is marked {INVALID}); loadgen's reasons:"
)
SCALED_DOWN_TITLE = (
    f"{SCALED_DOWN}: {{cells}} cell(s) ran below MLPerf's minimums for their benchmark (Offline: 600 s and its "
    f"sample count): timed and reported, but no figure of theirs is an MLPerf result ({LOADGEN_SPEED} is marked "
    f"{SCALED_DOWN}; only the {VALID} cells of a study size are). What fell short:"
)


def summarize(frame, metrics, include_emulated=False, always=(), thresholds=validity.DEFAULTS, cells=None):
    """One row per scenario and parameter combination, bm first, with mean, std and ratio to bm.

    Only the samples of ``metrics`` (and those of failed or skipped cells) make rows, so the labels of
    other metrics add none. Row keys: the scenario, the workload when the campaign has several, the
    host when several, and the labels (parameters, a metric's own labels) that vary; a sample without
    such a label is a row of its own (n/a), never dropped.
    An accelerator column follows platform when any sample has one; emulated (tcg) rows get no
    ratio unless ``include_emulated``. ``always``: labels that are row keys even where they do not vary.
    Returns (rows, keys, units): rows are dicts, keys the columns that identify a row; a row also holds
    each metric's values over its cells (``<metric> values``), its count of cells in each inference state (VALID,
    INVALID, scaled-down) and its ``validity``:
    the reasons (platbench/validity.py, by ``thresholds``) its figures cannot be trusted, "" when they can.
    ``cells``: the frame's ``cell_table``, where the caller holds it already.
    """
    for column in SCENARIO_LABELS + [
        "cell",
        HOST,
        ACCELERATOR,
        LOADGEN_RESULT,
        ROUND,
        SCHEDULE,
        DUET_PAIR,
        DUET_SIDE,
        SAMPLE_TIME,
        *validity.COLUMNS,
    ]:
        if column not in frame.columns:
            frame = frame.assign(**{column: None})
    by_workload = workload_keys(frame)
    frame = frame[frame["metric"].isin([*metrics, *OUTCOME_METRICS])]
    accelerated = [ACCELERATOR] if frame[ACCELERATOR].notna().any() else []
    wanted = [label for label in always if label in frame.columns] + varying_labels(frame)
    labels = by_workload + [label for label in dict.fromkeys(wanted) if label not in by_workload]
    keys = SCENARIO_LABELS[:1] + accelerated + SCENARIO_LABELS[1:] + host_keys(frame) + labels
    units = {metric: frame.loc[frame["metric"] == metric, "unit"].dropna().iloc[0] for metric in metrics}

    rows, values_of = [], {}
    table = cells if cells is not None else cell_table(frame)
    # Only the columns a row reads: each group is a copy of its samples, and a campaign's frame has a column per
    # label and metadata field (the groups of a 10,000-cell campaign copied about 0.4 s of columns never read).
    read = [*keys, "metric", "value", "cell", HOST, LOADGEN_RESULT, SCHEDULE, ROUND, DUET_PAIR, DUET_SIDE, SAMPLE_TIME]
    frame = frame[list(dict.fromkeys([*read, *validity.COLUMNS]))]
    for _, group in frame.groupby(keys, dropna=False, sort=False):
        succeeded = measured(group)
        first = group.iloc[0]
        row = {
            # The key values as the samples hold them: groupby gives a label with gaps (NaN) as floats.
            **{key: _python(first[key]) for key in keys},
            "n": succeeded["cell"].nunique(),
            "failed": int((group["metric"] == FAILED_METRIC).sum()),
            "skipped": int((group["metric"] == SKIPPED_METRIC).sum()),
            **{state: succeeded.loc[succeeded[LOADGEN_RESULT] == state, "cell"].nunique() for state in LOADGEN_STATES},
            # Every cell of the row ran in a duet pair (its baseline's row then did too: the schedule is a key).
            IN_DUET: bool(not succeeded.empty and (succeeded[SCHEDULE] == "duet").all()),
        }
        # Each metric's samples of the row, split once (a selection per metric costs more than the whole split).
        of_metric = dict(list(succeeded.groupby("metric", sort=False)))
        for metric in metrics:
            picked = of_metric.get(metric)
            values = [] if picked is None else [float(value) for value in picked["value"].tolist()]
            values_of[id(row), metric] = row[f"{metric} values"] = values
            row[f"{metric} count"] = len(values)
            row[f"{metric} mean"] = mean(values)
            row[f"{metric} std"] = sample_std(values)
            row[f"{metric} cv"] = coefficient_of_variation(values, row[f"{metric} std"], row[f"{metric} mean"])
            row[f"{metric} min"] = min(values) if values else None
            row[f"{metric} max"] = max(values) if values else None
            row[f"{metric} by pair"] = None if picked is None else _by_pair(picked)
        cells = _cells(succeeded, table)
        # An emulated guest's row (tcg) is functional only, never a measurement to trust: nothing to mark.
        row[validity.VALIDITY] = "" if is_emulated(row) else _validity(row, cells, metrics, thresholds)
        row[validity.HARNESS] = validity.harness_of(cells)
        rows.append(row)

    for row, baseline in zip(rows, baseline_rows(rows, keys, include_emulated), strict=True):
        for metric in metrics:
            row[f"{metric} ratio to {BASELINE}"] = ratio(row[f"{metric} mean"], baseline.get(f"{metric} mean"))
            row[f"{metric} within noise"] = None
            if same_window(row, metric):
                row[f"{metric} ratio to {BASELINE}"] = None  # bm's own row too: no bar of 1 beside nothing
                continue
            if not baseline or baseline is row:
                continue
            compared = comparison(row, baseline, metric)
            row[f"{metric} ratio method"] = compared["method"]
            row[f"{metric} pairs"] = compared["pairs"]
            if compared["method"] in PAIRED_METHODS:
                row[f"{metric} ratio to {BASELINE}"] = compared["estimate"]
            if compared["interval"] is not None:
                low, high = compared["interval"]
                row[f"{metric} within noise"] = low <= 1.0 <= high
    rows.sort(
        key=lambda row: (
            platform_rank(row["platform"]),
            str(row["platform"]),
            *(_sortable(row[key]) for key in keys[1:]),
        )
    )
    return rows, keys, units


def same_window(row, metric):
    """Whether ``row``'s ``metric`` is one both sides of a duet pair measure alike (SAME_WINDOW_METRICS) and the row
    ran in duet pairs: its ratio says nothing of the platforms."""
    return metric in SAME_WINDOW_METRICS and bool(row.get(IN_DUET))


def same_window_note(rows, metrics):
    """``elapsed: both sides of a duet pair...`` for each metric some row leaves uncompared (``same_window``), one
    line each; None when none does."""
    found = [metric for metric in metrics if any(same_window(row, metric) for row in rows)]
    return "\n".join(f"{metric}: {SAME_WINDOW}" for metric in found) or None


def _by_pair(picked):
    """``(how, {pair: value}, {pair: side}, {pair: when})`` of a row's samples of one metric (``picked``) whose cells
    can be paired with its baseline's, one value per pair: ``how`` is PAIRED (the pair is the round, in a rounds
    campaign) or DUET_PAIRED (the duet pair, in a duet campaign, with the CPU set each cell ran on, ``duet_side``; {}
    in a rounds campaign); ``when`` orders the pairs as they ran (the sample's time, then its round). None otherwise
    (a sequential or older campaign, a row with several values in a round), which compares unpaired."""
    # Each check a column at a time (a 10,000-cell campaign's row holds hundreds of samples a metric).
    schedules, sides = picked[SCHEDULE], {}
    if len(picked) and (schedules == "duet").all() and picked[DUET_PAIR].notna().all():
        how, keys = DUET_PAIRED, [str(pair) for pair in picked[DUET_PAIR].tolist()]
        if picked[DUET_SIDE].notna().all():
            sides = {key: int(side) for key, side in zip(keys, picked[DUET_SIDE].tolist(), strict=True)}
    elif len(picked) and (schedules == "rounds").all() and picked[ROUND].notna().all():
        how, keys = PAIRED, [int(repeat) for repeat in picked[ROUND].tolist()]
    else:
        return None
    if len(set(keys)) < len(keys):
        return None
    # A time or round that is not recorded sorts last.
    stamps, repeats = _numbers_or_last(picked[SAMPLE_TIME]), _numbers_or_last(picked[ROUND])
    when = dict(zip(keys, zip(stamps, repeats, strict=True), strict=True))
    values = {key: float(value) for key, value in zip(keys, picked["value"].tolist(), strict=True)}
    return how, values, sides, when


def _numbers_or_last(column):
    """A column's values as floats for ordering, converted in one pass; what is not recorded, or not a number,
    sorts last (inf)."""
    if column.dtype.kind in "iuf":  # already numbers (the store's times, a rounds campaign's rounds): no parsing
        return column.to_numpy(dtype=float, na_value=math.inf).tolist()
    return pd.to_numeric(column, errors="coerce").astype(float).fillna(math.inf).tolist()


def comparison(row, baseline, metric):
    """How ``row`` compares with its ``baseline`` row on ``metric``, the one estimate the table, the answer, the
    page and the budgets use: ``{"estimate", "interval", "method", "pairs", "sides"}``, the pairs (and their sides) in
    the order they ran (the row's samples' times, then their rounds). Rows of a rounds campaign
    with two or more rounds in common: paired by round; of a duet campaign with two or more duet pairs in common:
    paired by pair, blocked on the CPU set the row's side ran on (``sides``, one per pair; None unblocked) where
    each set holds two pairs or more (report_stats.paired_ratio_interval, Student's t on the log-ratios); otherwise
    the ratio of the means with Welch's interval (report_stats.ratio_interval). ``interval`` is None where it cannot
    be computed."""
    mine, theirs = row.get(f"{metric} by pair"), baseline.get(f"{metric} by pair")
    if mine and theirs and mine[0] == theirs[0]:
        keys = sorted((key for key in mine[1] if key in theirs[1]), key=lambda key: (*mine[3][key], str(key)))
        pairs = [(mine[1][key], theirs[1][key]) for key in keys]
        sides = [mine[2][key] for key in keys] if mine[2] else None  # _by_pair gives every pair's side, or none
        paired = paired_ratio_interval(pairs, sides=sides)
        if paired is not None:
            how = mine[0]
            if how == DUET_PAIRED and not blocks_on_sides(sides):
                how = DUET_PAIRED_UNBLOCKED  # the interval is the plain paired one: the method line says so
            return {"estimate": paired[0], "interval": paired[1:], "method": how, "pairs": pairs, "sides": sides}
    values, baseline_values = row.get(f"{metric} values") or [], baseline.get(f"{metric} values") or []
    return {
        "estimate": ratio(mean(values), mean(baseline_values)),
        "interval": ratio_interval(values, baseline_values),
        "method": UNPAIRED,
        "pairs": [],
        "sides": None,
    }


def rounds_needed(compared, row, baseline, metric, half_width):
    """How many more rounds (repeats; duet pairs) would bring ``compared``'s interval (``comparison``'s) to
    ±``half_width``: paired, from the pairs' spread (report_stats.pairs_needed, blocked as the interval is);
    unpaired, from the half-width shrinking as one over the square root of the rounds. None when it cannot be said
    (no interval, fewer than two rounds on a side)."""
    if compared["interval"] is None:
        return None
    if compared["method"] in PAIRED_METHODS:
        needed = pairs_needed(compared["pairs"], half_width, sides=compared.get("sides"))
        return None if needed is None else max(0, needed - len(compared["pairs"]))
    have = min(len(row.get(f"{metric} values") or []), len(baseline.get(f"{metric} values") or []))
    low, high = compared["interval"]
    half = (high - low) / 2.0
    return max(0, math.ceil(have * (half / half_width) ** 2) - have) if have >= 2 else None


def cell_table(frame):
    """``{cell: {host, validity.COLUMNS}}``: what each cell's first measurement says of it, the table ``_cells``
    reads. A report builds it once (ReportContext) for every summary of its frame, rather than each summary per row."""
    frame = measured(frame)
    columns = ["cell", HOST, *validity.COLUMNS]
    missing = {column: None for column in columns if column not in frame.columns}
    first = frame.assign(**missing)[columns].drop_duplicates("cell")
    # A column at a time (a 10,000-cell campaign's records one by one cost a quarter of a second).
    values = {name: _python_values(first[name]) for name in columns[1:]}
    names = first["cell"].tolist()
    return {
        cell: dict(zip(values, found, strict=True))
        for cell, found in zip(names, zip(*values.values(), strict=True), strict=True)
    }


def _python_values(column):
    """A column's values as ``_python`` gives them, converted in one pass."""
    present, values = column.notna().tolist(), column.astype(object).tolist()
    return [_python(value) if here else None for value, here in zip(values, present, strict=True)]


def _cells(succeeded, table=None):
    """One dict per cell of a row's measurements: its host and what its metadata say of it (validity.COLUMNS), from
    ``table`` (``cell_table`` of the report's frame) where it holds every cell of the row."""
    names = succeeded["cell"].unique().tolist()
    if table is None or not all(name in table for name in names):
        table = cell_table(succeeded)
    return [table[name] for name in names]


def _validity(row, cells, metrics, thresholds):
    """The row's validity marks, joined by "; ": its metrics' CV, and each cell's timed part, host state, the
    harness's share of its CPUs and the workload's own priority."""
    reasons = validity.cv_reasons(row["n"], {metric: row[f"{metric} cv"] for metric in metrics}, thresholds)
    timed = validity.timed_reason(
        [(cell[validity.TIMED_SECONDS], cell[validity.TIMED_STEPS]) for cell in cells], thresholds
    )
    reasons += [timed] if timed else []
    reasons += validity.host_reasons(
        [(cell[HOST] or NOT_AVAILABLE, cell[validity.STEAL_PERCENT], cell[validity.THROTTLE_EVENTS]) for cell in cells],
        thresholds,
    )
    harness = validity.harness_reason([cell[validity.HARNESS_CPU_SHARE] for cell in cells], thresholds)
    reasons += [harness] if harness else []
    priority = validity.priority_reason(
        [(cell[validity.WORKLOAD_POLICY], cell[validity.WORKLOAD_NICE]) for cell in cells]
    )
    reasons += [priority] if priority else []
    return "; ".join(reasons)


def with_intervals(rows, keys, metrics, include_emulated=False):
    """``rows`` (summarize's) with each metric's 95% intervals added where a row lacks them: ``<metric> interval``,
    of its mean (Student's t), and ``<metric> ratio interval``, of its ratio to bm (``comparison``: paired by round
    in a rounds campaign, Welch's otherwise; None for bm itself and rows without a baseline). The text table shows
    neither; the HTML page and the charts do."""
    for row, baseline in zip(rows, baseline_rows(rows, keys, include_emulated), strict=True):
        for metric in metrics:
            values = row.get(f"{metric} values") or []
            if f"{metric} interval" not in row:
                row[f"{metric} interval"] = mean_interval(values)
            if f"{metric} ratio interval" not in row:
                compared = baseline and baseline is not row and row.get(f"{metric} ratio to {BASELINE}") is not None
                row[f"{metric} ratio interval"] = comparison(row, baseline, metric)["interval"] if compared else None
    return rows


def _python(value):
    """A numpy scalar as the Python value it holds (an int sorts as a number); a missing label as None."""
    if pd.isna(value):
        return None
    return value.item() if isinstance(value, numpy.generic) else value


def with_keys_as_given(table, rows, keys):
    """``table`` (a frame of ``rows``) with the key columns holding the rows' own values: a label with gaps
    would otherwise turn into floats (size_mb 1.0)."""
    for key in keys:
        table[key] = pd.Series([row[key] for row in rows], index=table.index, dtype=object)
    return table


def baseline_rows(rows, keys, include_emulated=False):
    """The bm row each summarized row is compared with ({} when none), in the order of ``rows``; a row with a
    known overhead injected (an ``inject`` dimension) is compared with the same row without it.

    bm has no accelerator: a vm row matches the bm row of the same scenario and parameters. Emulated
    (tcg) rows get none unless ``include_emulated``."""

    def identity(row, platform, injected=None):
        return tuple(
            injected if key == inject.LABEL and injected else str(row[key])
            for key in keys
            if key not in ("platform", ACCELERATOR)
        ) + (platform,)

    def baseline_of(row):
        if is_emulated(row) and not include_emulated:
            return {}
        if inject.LABEL in keys and inject.is_injected(row.get(inject.LABEL)):
            # A known overhead injected (the experiment's inject dimension): against the same cells without it, or,
            # injected into some platforms only (inject_into), against bm's, which carry none.
            twin = baselines.get(identity(row, row["platform"], inject.NONE))
            return twin or baselines.get(identity(row, BASELINE, inject.NONE), {})
        return baselines.get(identity(row, BASELINE), {})

    baselines = {identity(row, row["platform"]): row for row in rows}
    return [baseline_of(row) for row in rows]


def _sortable(value):
    # Numbers before text, numbers by value: scale-up 2 before 16.
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return (0, value, "")
    return (1, 0, str(value))


def number_cell(value, digits):
    return NOT_AVAILABLE if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}}"


def measure_cell(value, scale=None):
    """Plain decimals sized to ``scale`` (default: the value): 1779, 41.7, 3.52, 0.0161; no exponents."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NOT_AVAILABLE
    magnitude = abs(value if scale is None else scale)
    decimals = 0 if magnitude >= 100 else 1 if magnitude >= 10 else 2 if magnitude >= 1 else 4
    return f"{value:.{decimals}f}"


def key_cells(row, keys):
    """A row's label values as table cells: a missing accelerator is bare metal's, anything else missing n/a."""
    return [
        (NO_ACCELERATOR if key == ACCELERATOR else NOT_AVAILABLE) if pd.isna(row[key]) else str(row[key])
        for key in keys
    ]


def mean_std_cell(row, metric):
    """``mean ± std`` of a summarized row's metric, the std rounded to the mean's scale."""
    center, spread = row[f"{metric} mean"], row[f"{metric} std"]
    return measure_cell(center) + ("" if spread is None else f" ± {measure_cell(spread, scale=center)}")


def mean_std_columns(metrics, units):
    """CSV column names of each metric's mean and std, with its unit."""
    columns = {}
    for metric in metrics:
        columns[f"{metric} mean"] = f"{metric} mean ({units[metric]})"
        columns[f"{metric} std"] = f"{metric} std ({units[metric]})"
    return columns


def count_columns(rows):
    """n and failed, skipped when some cell was, and the inference states some row's cells are in."""
    return ["n", "failed"] + (["skipped"] if any(row.get("skipped") for row in rows) else []) + loadgen_columns(rows)


def loadgen_columns(rows):
    """The inference states (VALID, INVALID, scaled-down) that some row holds cells of, in that order; [] for a
    campaign without inference runs."""
    return [state for state in LOADGEN_STATES if any(row.get(state) for row in rows)]


def loadgen_mark(row, metric):
    """After MLPerf's own figure, the state of the row's cells: `` (INVALID)``, `` (scaled-down)`` (both when the
    row holds both), `` (VALID)`` when all its cells are; nothing for another metric or a row without such cells."""
    if metric != LOADGEN_SPEED:
        return ""
    marks = [state for state in (INVALID, SCALED_DOWN) if row.get(state)] or [VALID] * bool(row.get(VALID))
    return f" ({', '.join(marks)})" if marks else ""


def validity_columns(rows):
    """[validity] when some row is marked (platbench/validity.py), else []: a valid campaign's tables stay as
    they were."""
    return [validity.VALIDITY] if any(row.get(validity.VALIDITY) for row in rows) else []


def display_table(rows, keys, metrics, units):
    """Header and rows of strings: ``mean ± std`` per metric with its unit, and its ratio to bm; the validity
    marks last, when some row has them."""
    counts = count_columns(rows)
    marks = validity_columns(rows)
    header = [*keys, *counts]
    for metric in metrics:
        header += [f"{metric} ({units[metric]})", "cv", f"{metric} / {BASELINE}"]
    lines = []
    for row in rows:
        line = [*key_cells(row, keys), *(str(row[count]) for count in counts)]
        for metric in metrics:
            line.append(mean_std_cell(row, metric) + loadgen_mark(row, metric))
            cv = row[f"{metric} cv"]
            line.append(NOT_AVAILABLE if cv is None else f"{100 * cv:.1f}%")
            mark = f" {NOISE_MARK}" if row[f"{metric} within noise"] else ""
            line.append(ratio_cell(row, metric, number_cell(row[f"{metric} ratio to {BASELINE}"], "3f") + mark))
        lines.append(line + [row[column] for column in marks])
    return header + marks, lines


def ratio_cell(row, metric, text):
    """``text``, a row's ratio to bm as a table shows it, or NOT_COMPARED where the ratio says nothing (a duet row's
    elapsed: ``same_window``)."""
    return NOT_COMPARED if same_window(row, metric) else text


def render_text(header, lines):
    widths = [max(len(cell) for cell in column) for column in zip(header, *lines, strict=False)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=False)).rstrip()
        for line in [header, ["-" * width for width in widths], *lines]
    )


def render_markdown(header, lines):
    return "\n".join("| " + " | ".join(line) + " |" for line in [header, ["---"] * len(header), *lines])


def csv_frame(rows, keys, metrics, units):
    """The numbers unrounded, units in the column names."""
    columns = {key: key for key in [*keys, *count_columns(rows)]}
    for metric in metrics:
        columns.update(mean_std_columns([metric], units))
        columns[f"{metric} cv"] = f"{metric} cv"
        columns[f"{metric} ratio to {BASELINE}"] = f"{metric} ratio to {BASELINE}"
        columns[f"{metric} within noise"] = f"{metric} within noise of {BASELINE} (95% CI)"
    columns.update({column: column for column in validity_columns(rows)})
    return with_keys_as_given(pd.DataFrame(rows, columns=list(columns)), rows, keys).rename(columns=columns)


def noise_note(rows, metrics):
    """The line explaining the noise mark, None when no ratio carries it."""
    if not any(row[f"{metric} within noise"] for row in rows for metric in metrics):
        return None
    return NOISE_NOTE


def duet_note(frame):
    """What a duet campaign's ratios are (DUET_NOTE), None for a campaign without duet pairs."""
    if SCHEDULE not in frame.columns or not (frame[SCHEDULE] == "duet").any():
        return None
    return DUET_NOTE


def skipped_note(frame):
    """The note listing the skipped cells, one line per workload and reason with its scenarios; None when
    no cell was skipped."""
    return cells_note(frame[frame["metric"] == SKIPPED_METRIC], SKIPPED_TITLE, SKIP_REASON)


def invalid_note(frame):
    """The note listing the cells loadgen called INVALID, one line per workload and reasons with its
    scenarios; None when there are none."""
    if LOADGEN_RESULT not in frame.columns:
        return None
    return cells_note(measured(frame[frame[LOADGEN_RESULT] == INVALID]), INVALID_TITLE, LOADGEN_REASONS)


def scaled_down_note(frame):
    """The note listing the scaled-down cells, one line per workload and shortfall with its scenarios; None when
    there are none."""
    if LOADGEN_RESULT not in frame.columns:
        return None
    return cells_note(measured(frame[frame[LOADGEN_RESULT] == SCALED_DOWN]), SCALED_DOWN_TITLE, LOADGEN_REASONS)


def cells_note(samples, title, reason_column):
    """``title`` (with the count of cells), then one line per workload and reason: its scenarios and cells."""
    if samples.empty:
        return None
    groups = {}
    for _, sample in samples.iterrows():
        workload = sample.get(WORKLOAD)
        reason = sample.get(reason_column)
        key = (
            NOT_AVAILABLE if pd.isna(workload) else str(workload),
            "no reason given" if pd.isna(reason) else str(reason),
        )
        scenario = sample.get("scenario")
        group = groups.setdefault(key, {"cells": set(), "scenarios": {}})
        group["cells"].add((sample.get("cell"), sample.get(HOST)))
        if not pd.isna(scenario):
            group["scenarios"][str(scenario)] = None
    cells = sum(len(group["cells"]) for group in groups.values())
    lines = [title.format(cells=cells)]
    for (workload, reason), group in groups.items():
        where = f" on {', '.join(group['scenarios'])}" if group["scenarios"] else ""
        lines.append(f"- {workload}{where} ({len(group['cells'])} cell(s)): {reason}")
    return "\n".join(lines)


def emulated_note(rows, include_emulated=False):
    """The line explaining tcg rows, None when there are none."""
    if not any(is_emulated(row) for row in rows):
        return None
    return EMULATED_INCLUDED_NOTE if include_emulated else EMULATED_NOTE
