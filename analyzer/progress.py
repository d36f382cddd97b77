"""Progress of a scan on a terminal: files done, findings so far, elapsed time.

Shown on stderr only when it is a terminal, not in CI, not with --quiet, and only once a scan has
run for more than a moment; it is cleared when the scan ends, so the report is all that remains.
Redrawn by the scanning loop itself (rich's auto-refresh thread is off): the main process keeps no
threads, so worker processes can be forked safely.
"""

from __future__ import annotations

import os
import sys
import time

DELAY = 0.5  # seconds before a scan is worth a progress display
REDRAW = 0.1


class Progress:
    """The no-op progress every scan reports to; TerminalProgress draws it."""

    def start(self, total: int) -> None:
        self.total = total

    def advance(self, findings: int) -> None:
        pass

    def tick(self) -> None:
        pass

    def close(self) -> None:
        pass


def wanted(quiet: bool, stream=None) -> bool:
    stream = stream if stream is not None else sys.stderr
    if quiet or os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class TerminalProgress(Progress):
    def __init__(self) -> None:
        self.total = self.done = self.findings = 0
        self.began = time.monotonic()
        self.last = 0.0
        self._bar = None
        self._task = None

    def advance(self, findings: int) -> None:
        self.done += 1
        self.findings += findings
        self.tick()

    def tick(self) -> None:
        now = time.monotonic()
        if now - self.began < DELAY or now - self.last < REDRAW:
            return
        self.last = now
        if self._bar is None:
            self._open()
        self._bar.update(self._task, completed=self.done, total=self.total, findings=self.findings)
        self._bar.refresh()

    def _open(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeElapsedColumn

        self._bar = Bar(
            TextColumn("scanning"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("files · {task.fields[findings]} findings"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
            auto_refresh=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._task = self._bar.add_task("scan", total=self.total, findings=0)
        self._bar.start()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def for_terminal(quiet: bool) -> Progress:
    return TerminalProgress() if wanted(quiet) else Progress()
