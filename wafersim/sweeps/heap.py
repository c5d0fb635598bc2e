"""Keep freed memory in the process for the next sweep point instead of giving it back.

A wse2 defect point builds ~50 MB of tables in arrays of ~25 MB each. glibc's defaults (and
more so a Dask nanny's ``MALLOC_TRIM_THRESHOLD_=65536``) return such blocks to the kernel when
freed, so the next point faults every page in again, zeroed: a third of a point's time, and
memory bandwidth the other worker on the machine then lacks (2 processes ran 1.63x one
alone, 1.81x with this). With blocks up to 32 MiB taken from the heap and up to 256 MiB of
free heap kept, a point reuses the last one's pages. The setting holds for the rest of the
process. It is made through glibc's ``mallopt``; where the C library has none, or not
glibc's parameters, nothing changes.

A Dask worker runs points on a thread, which glibc gives an arena of its own made of 64 MiB
heaps; a worker's points/s then varied by 25 % from one worker process to the next (15-20
points/s, against 18.5-20 with one arena). ``WORKER_ENVIRON`` makes the worker processes
wafersim starts use the main arena alone (the worker's other threads allocate little);
workers started by hand with ``dask worker`` take the same variable from their environment.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc <malloc.h>
MMAP_THRESHOLD_BYTES = 32 << 20  # above a wse2 point's largest table (24 MB)
TRIM_THRESHOLD_BYTES = 256 << 20  # free heap kept: a few points' worth of wse2 tables
WORKER_ENVIRON = {"MALLOC_ARENA_MAX": "1"}  # read by glibc when the process starts


@functools.cache
def keep_freed_memory() -> bool:
    """Set glibc's thresholds once per process; ``False`` where they could not be set."""
    if os.name != "posix" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library already loaded in the process
    except (OSError, AttributeError):
        return False
    trim = mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    mmap = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    return bool(trim and mmap)
