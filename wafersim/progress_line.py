"""A progress line for long CLI jobs (studies, sweeps), written to stderr by the CLI."""

from __future__ import annotations

from typing import Any, TextIO


class ProgressLine:
    """Progress on ``stream``: one line rewritten in place on a terminal, otherwise a line
    per tenth of the points (and the last). Called with the study's ``(done, total,
    elapsed)``; other jobs format their own line and call :meth:`show`."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.tenths_shown = 0
        self.open_line = False  # a terminal line written with \r and not yet ended

    def __call__(self, progress: Any) -> None:
        done, total, elapsed = progress
        left = elapsed / done * (total - done)
        line = f"study: {done}/{total} points, {elapsed:.1f} s elapsed, ~{left:.0f} s left"
        self.show(line, done, total)

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
