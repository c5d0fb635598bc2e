"""Exceptions that reach the user. The CLI prints ``str(error)`` as one line and exits 2
(74 for an :class:`OutputError`)."""

from __future__ import annotations

import re
import reprlib
from typing import Any

EXCERPT_CHARS = 80  # the most characters of a bad value that an error message quotes


class WaferSimError(Exception):
    """Base of every error wafersim raises on purpose."""


class ConfigError(WaferSimError, ValueError):
    """Bad input: an unknown key, a wrong type, or a value out of its allowed range."""


class DefectMapError(WaferSimError):
    """A defect map that is malformed, or a file that is not a defect map."""


class ConnectivityError(WaferSimError):
    """Working PEs that cannot reach each other through working PEs and links."""


class DeadlockError(WaferSimError):
    """A simulation that stopped making progress while work was pending."""


def _short_repr(limit: int) -> reprlib.Repr:
    """A ``reprlib.Repr`` that looks at a few items a level and a few levels, so that even a
    value of a billion shared items is quoted in microseconds."""
    short = reprlib.Repr()
    short.maxlevel = 3
    short.maxtuple = short.maxlist = short.maxarray = short.maxdict = 4
    short.maxset = short.maxfrozenset = short.maxdeque = 4
    short.maxstring = short.maxlong = short.maxother = limit
    return short


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """``repr(value)`` cut to at most ``limit`` characters on one line, so that an error about
    a huge (or alias-bombed) value stays short and is quick to build."""
    try:
        text = re.sub(r"\s*\n\s*", " ", _short_repr(limit).repr(value))
    except ValueError:  # an int past Python's digit limit for text
        text = f"<{type(value).__name__} of {value.bit_length()} bits>"
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


class OutputError(WaferSimError, OSError):
    """An output that could not be written (a full disk, no permission, a name too long): the
    CLI prints it as one line naming the file and exits 74, EX_IOERR."""


class FigureError(WaferSimError):
    """A figure outside its documented range: wafersim refuses to report what it cannot stand
    behind; the CLI prints it as one line naming the field and exits 70, EX_SOFTWARE."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where it lands as SIGINT raises KeyboardInterrupt, so that a job stops
    the same way for either (its ``finally`` blocks run, its temporaries go)."""

    signum = 15  # signal.SIGTERM, the same number on every POSIX system


def interrupt_in(error: BaseException | None) -> KeyboardInterrupt | None:
    """The interrupt ``error`` is, or was raised from or while handling: a signal that lands
    in Numba code can come back as a SystemError whose cause is the KeyboardInterrupt."""
    pending, seen = [error], set()
    while pending:
        error = pending.pop()
        if error is None or id(error) in seen:
            continue
        if isinstance(error, KeyboardInterrupt):
            return error
        seen.add(id(error))
        pending += [error.__cause__, error.__context__]
    return None
