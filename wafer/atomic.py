"""Atomic file writes: write a temporary file beside the target, then rename it over.

A failed write (a full disk, an I/O error, a read-only file system, no permission, a name
too long) is one :class:`OutputError` naming the target, and leaves no temporary behind: the
target keeps its previous content, or does not exist.
"""

from __future__ import annotations

import contextlib
import glob
import io
import itertools
import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wafersim.wafer.errors import ConfigError, OutputError

NAME_MAX = 255  # bytes in a file name, where the file system does not say (Linux, macOS)
MKSTEMP_TAIL = 12  # what mkstemp adds to the prefix: 8 random characters, then ".tmp"
_IMAGES = itertools.count()  # names of in-memory HDF5 files: HDF5 refuses a name open twice


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; rename it to ``path`` on success.

    The file gets the mode a plain ``open`` would give it (``0666`` less the umask, not
    ``mkstemp``'s ``0600``). Temporaries that a killed writer left beside the target (their
    name carries the writer's pid, which no longer runs) are removed first. An OSError in the
    block, or h5py's RuntimeError from a failed flush, becomes an :class:`OutputError`."""
    path = Path(path)
    with output_errors(path):
        tmp = _temporary(path)
        try:
            yield tmp
            os.chmod(tmp, 0o666 & ~_umask())
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):  # already renamed, or never written
                os.unlink(tmp)


@contextlib.contextmanager
def atomic_hdf5(path: str | Path, update: bool = False) -> Iterator[Any]:
    """An h5py file built in memory (new, or with ``update`` a copy of ``path`` to change),
    written to ``path`` atomically when the block ends. HDF5 never writes to the disk itself:
    after a write of its own fails (a full disk) it keeps half-closed objects that crash the
    process at exit."""
    import h5py

    with output_errors(path):
        if update:  # the file's bytes in memory, changed there
            memory = io.BytesIO(Path(path).read_bytes())
            with h5py.File(memory, "r+") as f:
                yield f
            image = memory.getvalue()
        else:
            name = f"wafersim-{os.getpid()}-{next(_IMAGES)}.h5"  # a name only: not on disk
            with h5py.File(name, "w", driver="core", backing_store=False) as f:
                yield f
                f.flush()
                image = f.id.get_file_image()
    write_bytes(path, image)


@contextlib.contextmanager
def output_errors(path: str | Path) -> Iterator[None]:
    """Turn a failed write of ``path`` into one :class:`OutputError` naming it: an OSError,
    or the RuntimeError h5py raises when HDF5 cannot flush a file."""
    try:
        yield
    except OutputError:
        raise
    except OSError as error:
        raise OutputError(f"cannot write {path}: {io_reason(error)}") from error
    except RuntimeError as error:
        if not _raised_in_h5py(error):
            raise
        raise OutputError(f"cannot write {path}: {io_reason(error)}") from error


def io_reason(error: BaseException) -> str:
    """Why an I/O call failed, in a few words: its errno's text (HDF5's long messages carry
    it as ``errno = N``), else the first line of its message."""
    number = getattr(error, "errno", None)
    if not number:
        found = re.search(r"errno = (\d+)", str(error))
        number = int(found.group(1)) if found else None
    if number:
        return os.strerror(number)
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _raised_in_h5py(error: BaseException) -> bool:
    tb = error.__traceback__
    while tb is not None:
        if f"h5py{os.sep}" in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False


def _temporary(path: Path) -> Path:
    """A new empty temporary beside ``path`` (its folder made if need be)."""
    if path.exists() and not path.is_file():  # never rename over a device or a pipe
        raise ConfigError(f"{path} is not a regular file: not written")
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphans(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{_stem(path)}.{os.getpid()}.", suffix=".tmp",
                               dir=path.parent)  # fmt: skip
    os.close(fd)
    return Path(tmp)


def _stem(path: Path) -> str:
    """``path``'s name as temporaries start with it: cut where the name of a temporary
    (``.<stem>.<pid>.XXXXXXXX.tmp``) would pass the file system's limit, which the target's
    own name may reach."""
    try:
        limit = os.pathconf(path.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = NAME_MAX
    room = limit - len(f"..{os.getpid()}.") - MKSTEMP_TAIL
    return os.fsdecode(os.fsencode(path.name)[: max(room, 1)])


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _remove_orphans(path: Path) -> None:
    """Delete ``.<name>.<pid>.*.tmp`` files beside ``path`` whose pid is not running."""
    stem = _stem(path)
    for tmp in path.parent.glob(f".{glob.escape(stem)}.*.tmp"):
        pid = tmp.name[len(stem) + 2 :].split(".", 1)[0]
        if pid.isascii() and pid.isdigit() and not _running(int(pid)):  # not '²': no int
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


def write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


@contextlib.contextmanager
def exclusive(path: str | Path, what: str) -> Iterator[None]:
    """Hold ``<path>.lock`` for the block, or refuse at once (:class:`ConfigError` naming
    ``what`` and the holder's pid) when another process holds it: two writers of one file
    would interleave. POSIX advisory locks (``fcntl``); the lock goes with the process, so a
    killed holder leaves nothing held. A lock that cannot be made (a folder in its place, a
    full disk) is an :class:`OutputError` naming it."""
    lock = Path(f"{path}.lock")
    with output_errors(lock):
        lock.parent.mkdir(parents=True, exist_ok=True)
        f = open(lock, "a+")  # noqa: SIM115 (held until the block ends)
    with f:
        _take(f, path, what, lock)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):  # the lock goes with the file anyway
                f.seek(0)
                f.truncate()


def _take(f: Any, path: str | Path, what: str, lock: Path) -> None:
    """Lock the open lock file ``f`` and write this process's pid into it."""
    import fcntl

    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "unknown"
        raise ConfigError(
            f"{path} is being written by another {what} (pid {holder}): wait for it to "
            "end, or write to another file"
        ) from None
    with output_errors(lock):
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
