"""A thread-safe module swap for Numba's CUDA simulator.

The simulator runs each CUDA thread as a Python thread. On each call of a device function it
points the ``cuda`` names of the function's module at its fake CUDA module (which has
``atomic``, ``local``, ``threadIdx``...) and points them back on return. Two threads in device
functions of one module race: the second finds no ``cuda`` to swap (the first has swapped it),
and when the first returns it restores the real module under the second, whose next
``cuda.atomic.add`` then fails with "module 'numba.cuda' has no attribute 'atomic'" (at
random, more often the more threads). numba-cuda fixed it in 2026-01 (NVIDIA/numba-cuda#690);
the simulator inside numba itself has not. :func:`install` replaces the swap by one counted
per module under a lock: the first thread in swaps, the last one out restores. A kernel
launch (one at a time in the simulator) swaps its own module the same way.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

_LOCK = threading.Lock()
_SWAPPED: dict[int, list] = {}  # id(module globals) -> [threads inside, the names swapped]


@contextmanager
def swapped_cuda_module(fn, fake_cuda_module):
    """The simulator's ``swapped_cuda_module``, counted: ``fn``'s module sees the fake CUDA
    module while any thread is inside a function of it."""
    from numba import cuda

    names = fn.__globals__
    key = id(names)
    with _LOCK:
        entry = _SWAPPED.get(key)
        if entry is None:
            real = {name: value for name, value in names.items() if value is cuda}
            names.update(dict.fromkeys(real, fake_cuda_module))
            entry = _SWAPPED[key] = [0, real]
        entry[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            entry[0] -= 1
            if entry[0] == 0:
                names.update(entry[1])
                del _SWAPPED[key]


def install() -> None:
    """Use :func:`swapped_cuda_module` in the simulator's kernels and device functions."""
    from numba.cuda.simulator import kernel

    kernel.swapped_cuda_module = swapped_cuda_module
