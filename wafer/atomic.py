"""Atomic file writes: write a temporary file beside the target, then rename it over."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wafersim.wafer.errors import ConfigError


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; rename it to ``path`` on success.

    The file gets the mode a plain ``open`` would give it (``0666`` less the umask, not
    ``mkstemp``'s ``0600``). Temporaries that a killed writer left beside the target (their
    name carries the writer's pid, which no longer runs) are removed first."""
    path = Path(path)
    if path.exists() and not path.is_file():  # never rename over a device or a pipe
        raise ConfigError(f"{path} is not a regular file: not written")
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphans(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp",
                               dir=path.parent)  # fmt: skip
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _remove_orphans(path: Path) -> None:
    """Delete ``.<name>.<pid>.*.tmp`` files beside ``path`` whose pid is not running."""
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        pid = tmp.name[len(path.name) + 2 :].split(".", 1)[0]
        if pid.isdigit() and not _running(int(pid)):
            with contextlib.suppress(OSError):
                tmp.unlink()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it runs
        pass
    return True


def write_json(path: str | Path, data: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


@contextlib.contextmanager
def exclusive(path: str | Path, what: str) -> Iterator[None]:
    """Hold ``<path>.lock`` for the block, or refuse at once (:class:`ConfigError` naming
    ``what`` and the holder's pid) when another process holds it: two writers of one file
    would interleave. POSIX advisory locks (``fcntl``); the lock goes with the process, so a
    killed holder leaves nothing held."""
    import fcntl

    lock = Path(f"{path}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            raise ConfigError(
                f"{path} is being written by another {what} (pid {holder}): wait for it to "
                "end, or write to another file"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        try:
            yield
        finally:
            f.seek(0)
            f.truncate()
