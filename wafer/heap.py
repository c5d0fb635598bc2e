"""Keep freed memory in the process for the next sweep point instead of giving it back.

A wse2 defect point builds ~60 MB of tables in arrays of ~25 MB each. glibc's defaults (and
more so a Dask nanny's ``MALLOC_TRIM_THRESHOLD_=65536``) return such blocks to the kernel when
freed, so the next point faults every page in again, zeroed: a third of a point's time, and
memory bandwidth the other worker on the machine then lacks (2 processes ran 1.63x one
alone, 1.81x with this). With blocks up to 32 MiB taken from the heap and up to 256 MiB of
free heap kept, a point reuses the last one's pages. Only glibc has ``mallopt``; elsewhere
this does nothing.

A Dask worker runs points on a thread, which glibc gives an arena of its own made of 64 MiB
heaps; a worker's points/s then varied by 25 % from one worker process to the next (15-20
points/s, against 18.5-20 with one arena). ``WORKER_ENVIRON`` makes the worker processes
wafersim starts use the main arena alone (their one task thread contends with nothing);
workers started by hand with ``dask worker`` take the same variable from their environment.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc <malloc.h>
MMAP_THRESHOLD_BYTES = 32 << 20  # glibc's largest allowed value on 64-bit (HEAP_MAX_SIZE / 2)
TRIM_THRESHOLD_BYTES = 256 << 20  # free heap kept: a few points' worth of wse2 tables
WORKER_ENVIRON = {"MALLOC_ARENA_MAX": "1"}  # read by glibc when the process starts


@functools.cache
def keep_freed_memory() -> bool:
    """Set glibc's thresholds once per process; ``False`` where there is no ``mallopt``."""
    name = ctypes.util.find_library("c")
    mallopt = getattr(ctypes.CDLL(name), "mallopt", None) if name else None
    if mallopt is None:
        return False
    return bool(
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
        and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
