"""The report context: what every part of one report reads, built once by ``platbench report`` and handed to each
table, figure and page section instead of the frame, the emulated-rows switch, the validity thresholds and the
figure titles one by one.

- ``frame``: the campaign's samples (report_load.load_samples);
- ``include_emulated``: whether emulated (tcg) rows are compared with bm (``--include-emulated``);
- ``thresholds``: when a row's figures cannot be trusted (platbench/validity.py);
- ``title``: the run named in every figure's title (report_meta.context_line);
- ``summarize(metrics, always)``: the frame summarized (report_tables.summarize) once per set of metrics, so that
  the text table, the page and the budgets read the same rows.
"""

from platbench import validity
from platbench.report.load import is_emulated
from platbench.report.tables import (
    EMULATED_INCLUDED_NOTE,
    EMULATED_NOTE,
    baseline_rows,
    cell_table,
    emulated_note,
    summarize,
    with_intervals,
)


class ReportContext:
    """See the module's docstring."""

    def __init__(self, frame, include_emulated=False, thresholds=validity.DEFAULTS, title=None):
        self.frame = frame
        self.include_emulated = include_emulated
        self.thresholds = thresholds
        self.title = title
        self._summaries = {}
        self._cells = None

    def summarize(self, metrics, always=(), frame=None):
        """(rows, keys, units) of ``metrics``: the report's own frame summarized once per (metrics, always), the
        same rows for every caller; a part's own ``frame`` (the phases with their shares, the shared cells'
        alone and beside runs) summarized anew each time."""
        if frame is not None:
            return summarize(frame, metrics, self.include_emulated, always, self.thresholds)
        key = (tuple(metrics), tuple(always))
        if key not in self._summaries:
            if self._cells is None:
                self._cells = cell_table(self.frame)  # what each cell says of itself, the same for every summary
            self._summaries[key] = summarize(
                self.frame, metrics, self.include_emulated, always, self.thresholds, cells=self._cells
            )
        return self._summaries[key]

    def compared(self, row):
        """Whether ``row`` is compared with bm: every row but an emulated one, unless emulated rows are asked for."""
        return self.include_emulated or not is_emulated(row)

    def baselines(self, rows, keys):
        """The bm row of each of ``rows`` (report_tables.baseline_rows), by this report's rule for emulated rows."""
        return baseline_rows(rows, keys, self.include_emulated)

    def with_intervals(self, rows, keys, metrics):
        """``rows`` with their 95% intervals (report_tables.with_intervals)."""
        return with_intervals(rows, keys, metrics, self.include_emulated)

    @property
    def emulated_rule(self):
        """The line that says what is done with emulated rows in this report."""
        return EMULATED_INCLUDED_NOTE if self.include_emulated else EMULATED_NOTE

    def emulated_note(self, rows):
        """The emulated rows' rule when ``rows`` hold any, None otherwise."""
        return emulated_note(rows, self.include_emulated)
