"""How ``platbench run`` shows a campaign: on a terminal, rich's live progress (the campaign's bar with its
ETA, and a line per running cell with its elapsed time) under the lines of the finished cells; anywhere else,
plain lines, one per finished cell."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

from platbench.campaign import human


def _clock(seconds):
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


class PlainDisplay:
    """Lines only: what ``Campaign.feed`` says is worth keeping."""

    def __init__(self, campaign, stream=None):
        self.campaign = campaign
        self.stream = stream or sys.stdout

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def line(self, text):
        print(text, file=self.stream, flush=True)

    def refresh(self):
        """Nothing moves off a terminal."""


class LiveDisplay:
    """The finished cells' lines, and under them the campaign's bar and one line per running cell."""

    def __init__(self, campaign, console=None):
        self.campaign = campaign
        self.console = console or Console()
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[info]}"),
            console=self.console,
            transient=True,  # the bars go at the end: the finished lines and the summary stay
            auto_refresh=False,  # refreshed by the loop that feeds the campaign: one thread touches it
        )
        self._overall = self.progress.add_task(f"campaign {campaign.name}", total=None, info="planning")
        self._cells = {}  # host -> (cell id, task id)

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc):
        self.progress.stop()
        return False

    def line(self, text):
        self.progress.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def refresh(self):
        campaign = self.campaign
        total = campaign.total or None
        info = f"{campaign.finished}/{total}, ETA {human(campaign.eta())}" if total else "planning"
        self.progress.update(self._overall, total=total, completed=campaign.finished, info=info)
        running = {row[2]: row for row in campaign.running()}
        for host in list(self._cells):
            if host not in running or running[host][1] != self._cells[host][0]:
                self.progress.remove_task(self._cells.pop(host)[1])
        several = len(campaign.hosts) > 1
        for host, (position, cell, _, seconds) in running.items():
            info = _clock(seconds) + (f" on {host}" if several else "")
            description = f"[{position}/{campaign.total}] {cell}"
            if host not in self._cells:
                self._cells[host] = (cell, self.progress.add_task(description, total=None, info=info))
            else:
                self.progress.update(self._cells[host][1], description=description, info=info)
        self.progress.refresh()


def display_for(campaign, stream=None):
    """The live display on a terminal, plain lines elsewhere."""
    stream = stream or sys.stdout
    if stream.isatty():
        return LiveDisplay(campaign, Console(file=stream))
    return PlainDisplay(campaign, stream)
