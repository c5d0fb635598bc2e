"""Compile a cached Numba kernel once per machine, not once per process.

Numba compiles a ``cache=True`` function on its first call and writes the result to its cache
(``__pycache__`` beside the source, ``NUMBA_CACHE_DIR``, or a per-user folder where the
source tree is read-only); a process that finds it there loads it in a fraction of the time.
Processes that start together on a fresh install (pytest-xdist workers, Dask sweep workers,
runs side by side) all miss the cache and compile the same code at once, each taking as long
as one alone would on its own core, or longer on a shared one. :func:`compile_once` makes them
take turns: the first compiles and caches, the others wait on a file lock, then load. The lock
is per signature, so that processes that need different specializations of one function (the
engine's programs and traffic kernels, say) compile them at the same time.

Numba writes a function's cache with no lock: it reads the index, picks a data file's name
that the index does not use, writes the data, then the index. Two processes saving at once
(two specializations of one function, or of a function both call) could drop one's entry from
the index or give both the same data file. Once this module is imported, every cache save of
the process (of any cached function, the ones the engine calls included) holds a machine lock
named after that function's index file (``fabric.numba_compat.LOCKED_CACHE_SAVES``, inside
its tested window of Numba versions).

The lock is POSIX-only (``fcntl.flock``). Where the platform has no ``fcntl``, each process
compiles on its own, without the lock, and Numba saves its cache as it always does.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numba
from wafersim.fabric import numba_compat


def compile_once(dispatcher, args: tuple) -> None:
    """Compile ``dispatcher`` (an ``njit(cache=True)`` function) for the types of ``args``,
    or load it from Numba's cache, while holding this machine's lock for that signature;
    nothing to do once this process has it."""
    signature = tuple(numba.typeof(value) for value in args)
    if signature in dispatcher.overloads:
        return
    with _machine_lock(signature_key(dispatcher, signature)):
        dispatcher.compile(signature)


def signature_key(dispatcher, signature: tuple) -> str:
    """What names the machine's compile lock of ``dispatcher`` for ``signature``."""
    source = f"{dispatcher.py_func.__code__.co_filename}:{dispatcher.py_func.__qualname__}"
    return f"{source}:{signature}"


def _lock_cache_saves() -> bool:
    """Make every cache save of this process hold the machine's lock for that function's
    index file; returns whether it could (where Numba's cache is the one this was written
    against: a save of ``(self, key, data)`` by a cache file that knows its index's path)."""
    from numba.core.caching import IndexDataCacheFile

    save = IndexDataCacheFile.save
    if getattr(save, "locked", False):
        return True
    if "_index_path" not in IndexDataCacheFile.__init__.__code__.co_names:
        return False

    def locked_save(self, key, data):
        with _machine_lock(getattr(self, "_index_path", "")):
            save(self, key, data)

    locked_save.locked = True
    IndexDataCacheFile.save = locked_save
    return True


@contextlib.contextmanager
def _machine_lock(key: str) -> Iterator[None]:
    """An exclusive lock shared by every process of the machine that takes it for ``key`` (a
    function's source and signature, or its cache index's path); a folder that cannot hold the
    lock file, or a platform without ``fcntl``: no lock."""
    if not numba_compat.available(numba_compat.COMPILE_LOCK):
        yield
        return
    fcntl = importlib.import_module("fcntl")
    name = hashlib.sha256(key.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"wafersim-compile-{name}.lock"
    try:
        lock = open(path, "a")  # noqa: SIM115 (held until the block ends)
    except OSError:
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


numba_compat.install(numba_compat.LOCKED_CACHE_SAVES)  # every cache save of the process
