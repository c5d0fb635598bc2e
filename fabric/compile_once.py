"""Compile a cached Numba kernel once per machine, not once per process.

Numba compiles a ``cache=True`` function on its first call and writes the result to its cache
(``__pycache__`` beside the source, ``NUMBA_CACHE_DIR``, or a per-user folder where the
source tree is read-only); a process that finds it there loads it in a fraction of the time.
Processes that start together on a fresh install (pytest-xdist workers, Dask sweep workers,
runs side by side) all miss the cache and compile the same code at once, each taking as long
as one alone would on its own core, or longer on a shared one. :func:`compile_once` makes them
take turns: the first compiles and caches, the others wait on a file lock, then load. The lock
is per signature, so that processes that need different specializations of one function (the
engine's programs and traffic kernels, say) compile them at the same time; their writes to the
function's one cache index take a second lock (Numba takes none: two processes saving at once
could both pick the same data file for different signatures).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numba


def compile_once(dispatcher, args: tuple) -> None:
    """Compile ``dispatcher`` (an ``njit(cache=True)`` function) for the types of ``args``,
    or load it from Numba's cache, while holding this machine's lock for that signature;
    nothing to do once this process has it."""
    signature = tuple(numba.typeof(value) for value in args)
    if signature in dispatcher.overloads:
        return
    _lock_cache_writes(dispatcher)
    with _machine_lock(dispatcher, str(signature)):
        dispatcher.compile(signature)


def _lock_cache_writes(dispatcher) -> None:
    """Make this process's writes of ``dispatcher``'s cache (its index and a data file) take
    the machine's lock for that function's index (where the cache's internals are Numba's)."""
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    save = getattr(cache_file, "save", None)
    if save is None or getattr(save, "locked", False):
        return

    def locked_save(key, data):
        with _machine_lock(dispatcher, "cache index"):
            save(key, data)

    locked_save.locked = True
    cache_file.save = locked_save


@contextlib.contextmanager
def _machine_lock(dispatcher, part: str) -> Iterator[None]:
    """An exclusive lock shared by every process of the machine that takes ``part`` (a
    signature, or the cache index) of this function from this source file (a folder that
    cannot hold the lock file: no lock)."""
    source = f"{dispatcher.py_func.__code__.co_filename}:{dispatcher.py_func.__qualname__}"
    name = hashlib.sha256(f"{source}:{part}".encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"wafersim-compile-{name}.lock"
    try:
        lock = open(path, "a")  # noqa: SIM115 (held until the block ends)
    except OSError:
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield
