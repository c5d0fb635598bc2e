"""Progress of long CLI jobs (studies, sweeps, runs) on stderr.

With the ``progress`` extra (tqdm) a job draws a tqdm bar on a terminal or in a Jupyter
notebook; otherwise, and off a terminal (CI logs, pipes), :class:`ProgressLine` writes one
line rewritten in place on a terminal, or a line per tenth of the work. Jobs format their
own line (counts, elapsed, time left) and call :meth:`show`; the bar draws it beside the bar.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any, TextIO


class ProgressLine:
    """Progress on ``stream``: one line rewritten in place on a terminal, otherwise a line
    per tenth of the work (and the last)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.tenths_shown = 0
        self.open_line = False  # a terminal line written with \r and not yet ended

    def show(self, line: str, done: int, total: int) -> None:
        tenths = done * 10 // max(total, 1)
        if self.tty:
            self.stream.write("\r" + line)
            self.open_line = True
        elif tenths > self.tenths_shown or done == total:
            self.tenths_shown = tenths
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the terminal line, so what follows (a result, an error) starts on its own."""
        if self.open_line:
            self.stream.write("\n")
            self.stream.flush()
            self.open_line = False


class ProgressBar:
    """A :class:`ProgressLine` drawn by tqdm (``tqdm.auto``: a widget in a notebook), the
    job's line as the bar's text."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.bar: Any = None

    def show(self, line: str, done: int, total: int) -> None:
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, file=self.stream, bar_format="{desc} |{bar}|")
        self.bar.total, self.bar.n = total, done
        self.bar.set_description_str(line, refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def progress_for(stream: TextIO = sys.stderr) -> ProgressLine | ProgressBar:
    """A tqdm bar where tqdm is installed and ``stream`` is a terminal or a notebook shows
    it, else a :class:`ProgressLine` on ``stream``."""
    shows_a_bar = stream.isatty() or "ipykernel" in sys.modules
    if shows_a_bar and importlib.util.find_spec("tqdm") is not None:
        return ProgressBar(stream)
    return ProgressLine(stream)


def study_line(progress: Any) -> tuple[str, int, int]:
    """The defect study's line from its ``(done, total, elapsed)``."""
    done, total, elapsed = progress
    left = elapsed / done * (total - done)
    return f"study: {done}/{total} points, {elapsed:.1f} s elapsed, ~{left:.0f} s left", done, total
