"""A progress bar on stderr for long backtests, drawn only when stderr is a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """``[#####.....] 50% 1008/2016 steps``, redrawn at most ten times a second."""

    def __init__(self, label: str, stream: TextIO | None = None, width: int = 30) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.width = width
        self._drawn = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._drawn < 0.1:
            return
        self._drawn = now
        filled = self.width * done // max(1, total)
        self.stream.write(
            f"\r{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {100 * done // max(1, total):3d}% "
            f"{done}/{total} steps"
        )
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


def progress_for(label: str, quiet: bool) -> ProgressBar | None:
    """A bar when a person is watching; none with --json or when stderr is a file or a pipe."""
    return None if quiet or not sys.stderr.isatty() else ProgressBar(label)
