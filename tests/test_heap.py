"""wafersim.sweeps.heap: after ``keep_freed_memory`` a table-sized array comes from the kept
heap."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

from wafersim.sweeps.heap import MMAP_THRESHOLD_BYTES

_MAPPED_BYTES = """
import ctypes, sys
import numpy as np
from wafersim.sweeps.heap import keep_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd",
        "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
kept = keep_freed_memory() if sys.argv[1] == "keep" else None
table = np.ones(int(sys.argv[2]), dtype=np.uint8)  # a table of that many bytes
print(kept, libc.mallinfo2().hblkhd)
"""


def _mapped_bytes(mode: str, size: int) -> tuple[str, int]:
    """(what keep_freed_memory returned, bytes in mmapped blocks) with a live array."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_MAPPED_BYTES), mode, str(size)],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return out[0], int(out[1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
@pytest.mark.slow
def test_a_table_sized_array_is_mapped_by_default_and_heap_allocated_when_kept():
    size = MMAP_THRESHOLD_BYTES // 2  # a wse2 point's largest tables are ~24 MB
    _, default = _mapped_bytes("default", size)
    kept, after = _mapped_bytes("keep", size)
    assert default >= size  # glibc maps it (and unmaps it when freed): the cost avoided
    assert kept == "True"
    assert after < size
