"""The ``wafersim`` command line: one entry point, one subcommand per job.

Every subcommand takes ``--json``; those that draw anything ``--seed``; ``key=value`` words
anywhere on the line set spec keys (``run``: run-config keys; ``plot`` and ``sweep`` take
none). Errors are one line on stderr: exit status 2 for bad input, 74 (EX_IOERR) for a
file or stdout that could not be written or read, 128 + the signal's number (130, 143) for
SIGINT and SIGTERM, 141 (as SIGPIPE would) when stdout's reader has gone; the library
raises, only this module prints.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from wafersim.commands.jobs import command
from wafersim.commands.options import check_output, flag
from wafersim.commands.parser import parse_command_line
from wafersim.fields import checked
from wafersim.wafer.atomic import io_reason
from wafersim.wafer.errors import (
    FigureError,
    OutputError,
    Terminated,
    WaferSimError,
    interrupt_in,
)

BAD_INPUT = 2  # a usage error or bad input (argparse exits so too)
EX_SOFTWARE = 70  # sysexits.h: an internal error (a figure outside its documented range)
EX_IOERR = 74  # sysexits.h: an error while doing I/O on a file
SIGPIPE_STATUS = 128 + signal.SIGPIPE  # the shell's status of a tool killed by SIGPIPE


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit status
    (0, or after a one-line message on stderr 2, 74, 130, 141 or 143)."""
    with _signals_raise() as received:
        try:
            return _command_line(sys.argv[1:] if argv is None else list(argv), received)
        except SystemExit:  # argparse's --help and usage errors: their own output
            _flush_stdout()
            raise
        except BaseException as error:
            status = _interrupted(error, received)
            if status is None:
                raise
            return status


def _command_line(argv: list[str], received: list[int]) -> int:
    name = "wafersim"
    try:
        args = parse_command_line(argv)
        name = f"wafersim {args.command}"
        job = command(args.command)
        for option, kind in job.outputs.items():
            check_output(getattr(args, option, None), flag(option), kind)
        result = job.execute(args)
        if received:  # a signal whose exception the job caught and dropped: not done
            raise Terminated() if received[0] == signal.SIGTERM else KeyboardInterrupt
        return _emit(checked(args.command, result), args.json, job.text)
    except (WaferSimError, RecursionError, OSError) as error:
        if interrupt_in(error) is not None or received:
            raise
        return _failed(name, error)


def _failed(name: str, error: BaseException) -> int:
    """One line on stderr for ``error``; its exit status."""
    if isinstance(error, BrokenPipeError):  # stdout's reader has gone (`| head`): quietly
        _drop_stdout()
        return SIGPIPE_STATUS
    if isinstance(error, RecursionError):  # a file's tables or lists nested thousands deep
        _say(f"{name}: error: an input file is nested too deeply")
        return BAD_INPUT
    if isinstance(error, OutputError) or not isinstance(error, WaferSimError):
        _say(f"{name}: error: {_io_message(error)}")
        return EX_IOERR
    _say(f"{name}: error: {error}")
    return EX_SOFTWARE if isinstance(error, FigureError) else BAD_INPUT


def _io_message(error: BaseException) -> str:
    """An OSError as ``FILE: reason`` (OutputError's own message names its file)."""
    if isinstance(error, OutputError):
        return str(error)
    name = getattr(error, "filename", None)
    return f"{name}: {io_reason(error)}" if name else io_reason(error)


def _emit(result: dict[str, Any], as_json: bool, text: Any) -> int:
    """Print the result and flush it here, so that a failed write of stdout (a closed pipe,
    a full disk) is caught now, not in Python's flush at exit."""
    out = json.dumps(result, indent=2, sort_keys=True) if as_json else text(result)
    try:
        sys.stdout.write(out + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        _drop_stdout()
        raise OutputError(f"cannot write to stdout: {io_reason(error)}") from error
    return 0


def _flush_stdout() -> None:
    """Flush stdout now; if its reader has gone or its disk is full, drop what is left."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        _drop_stdout()


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that Python's flush at exit does not fail again."""
    stdout = sys.__stdout__
    if stdout is None or sys.stdout is not stdout:  # none, or a caller's (a test's): theirs
        return
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stdout.fileno())
        os.close(devnull)


def _say(line: str) -> None:
    """A line on stderr, unless stderr itself cannot be written."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def _signals_raise() -> Iterator[list[int]]:
    """For the block, SIGINT raises KeyboardInterrupt and SIGTERM :class:`Terminated` where
    they land, and each is noted in the list yielded: Numba code can turn the exception into
    another one, or lose it. Signals a caller ignores or handles itself stay so."""
    received: list[int] = []

    def stop(signum: int, frame: Any) -> None:
        received.append(signum)
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt

    previous = {}
    if threading.current_thread() is threading.main_thread():  # where Python runs handlers
        for signum, default in ((signal.SIGINT, signal.default_int_handler),
                                (signal.SIGTERM, signal.SIG_DFL)):  # fmt: skip
            if signal.getsignal(signum) is default:
                previous[signum] = signal.signal(signum, stop)
    hook = sys.unraisablehook
    if previous:
        sys.unraisablehook = _redeliver(hook)
    try:
        yield received
    finally:
        sys.unraisablehook = hook
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _redeliver(hook: Any) -> Any:
    """An unraisable-exception hook that, where a signal's exception landed in code whose
    exceptions Python drops (a weakref callback, a ``__del__``), sends the signal again a
    moment later, to land in the job's own code, rather than print a traceback."""

    def unraisable(info: Any) -> None:
        interrupt = interrupt_in(info.exc_value) if info.exc_value is not None else None
        if interrupt is None:
            hook(info)
            return
        signum = signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT
        threading.Timer(0.01, os.kill, (os.getpid(), signum)).start()

    return unraisable


def _interrupted(error: BaseException, received: list[int]) -> int | None:
    """128 + the signal's number after one line on stderr, if ``error`` comes of SIGINT or
    SIGTERM (None: it does not, let it go on)."""
    interrupt = interrupt_in(error)
    if interrupt is not None:
        signum = getattr(interrupt, "signum", signal.SIGINT)
    elif received:  # the interrupt was lost on the way (a SystemError out of Numba code)
        signum = received[0]
    else:
        return None
    _say(f"wafersim: interrupted by {signal.Signals(signum).name}")
    return 128 + signum


if __name__ == "__main__":
    sys.exit(main())
