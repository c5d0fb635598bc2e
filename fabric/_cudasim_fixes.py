"""Two fixes to Numba's CUDA simulator, installed where the engine runs in it.

A thread-safe module swap. The simulator runs each CUDA thread as a Python thread. On each call
of a device function it points the ``cuda`` names of the function's module at its fake CUDA
module (which has ``atomic``, ``local``, ``threadIdx``...) and points them back on return. Two
threads in device functions of one module race: the second finds no ``cuda`` to swap (the first
has swapped it), and when the first returns it restores the real module under the second, whose
next ``cuda.atomic.add`` then fails with "module 'numba.cuda' has no attribute 'atomic'" (at
random, more often the more threads). numba-cuda fixed it in 2026-01 (NVIDIA/numba-cuda#690);
the simulator inside numba itself has not. :func:`install` replaces the swap by one counted per
module under a lock: the first thread in swaps, the last one out restores. A kernel launch (one
at a time in the simulator) swaps its own module the same way.

A block barrier that waits instead of polling. The simulator's block manager polls every
thread, in a loop on the main thread, to see whether all have reached ``syncthreads`` (a grid
sync too, the block being the grid there); the loop holds the interpreter most of the time the
simulated threads need, so that most of a case's time goes to polling
(``threading.is_alive``). :class:`BarrierBlockManager` counts the threads at the barrier under a
condition variable: the last to arrive (or to exit) releases the others, and the main thread
sleeps until every thread has ended or one has raised, which then aborts the others as the
simulator's own does.

``fabric.numba_compat.CUDASIM_FIXES`` installs both inside their tested window of versions (of
Numba's own simulator, or numba-cuda's where that is installed), and :func:`install` only where
the simulator launches through the names replaced here and its threads hold the fields read
here; elsewhere the simulator runs as it is.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np

_LOCK = threading.Lock()
# id(module globals) -> [threads inside, the real module's names there, the fake swapped in]
_SWAPPED: dict[int, list] = {}


@contextmanager
def swapped_cuda_module(fn, fake_cuda_module):
    """The simulator's ``swapped_cuda_module``, counted: ``fn``'s module sees the fake CUDA
    module while any thread is inside a function of it. A launch's own fake replaces another
    still swapped in (a thread of a failed launch, which the simulator does not wait for,
    may still be inside the module)."""
    from numba import cuda

    names = fn.__globals__
    key = id(names)
    with _LOCK:
        entry = _SWAPPED.get(key)
        if entry is None:
            real = {name: value for name, value in names.items() if value is cuda}
            entry = _SWAPPED[key] = [0, real, None]
        if entry[2] is not fake_cuda_module:
            names.update(dict.fromkeys(entry[1], fake_cuda_module))
            entry[2] = fake_cuda_module
        entry[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            entry[0] -= 1
            if entry[0] == 0:
                names.update(entry[1])
                del _SWAPPED[key]


def install() -> bool:
    """Use :func:`swapped_cuda_module` in the simulator's kernels and device functions, and
    :class:`BarrierBlockManager` for its blocks, where the simulator is the one known here;
    returns whether they are in place."""
    from numba.cuda.simulator import kernel

    if kernel.swapped_cuda_module is swapped_cuda_module:
        return True
    if not _knows_simulator(kernel):
        return False
    kernel.swapped_cuda_module = swapped_cuda_module
    kernel.BlockManager = _barrier_manager(kernel.BlockThread)
    return True


def _knows_simulator(kernel) -> bool:
    """Whether the simulator's module ``kernel`` launches through its globals
    ``swapped_cuda_module`` and ``BlockManager``, and its threads hold the fields that
    :class:`BarrierBlockManager` reads and sets."""
    launch = set(kernel.FakeCUDAKernel.__call__.__code__.co_names)
    thread = set(kernel.BlockThread.__init__.__code__.co_names)
    return (
        {"swapped_cuda_module", "BlockManager"} <= launch
        and {"_manager", "exception", "abort", "blockIdx", "threadIdx"} <= thread
        and callable(getattr(kernel.BlockThread, "syncthreads", None))
    )


def _barrier_manager(block_thread: type) -> type:
    """:class:`BarrierBlockManager` over the simulator's thread class ``block_thread``."""

    class BarrierThread(block_thread):
        """A simulated CUDA thread whose ``syncthreads`` waits at its block's barrier."""

        def run(self):
            try:
                super().run()  # keeps an Exception in self.exception, rebuilt with the tid
            except BaseException as error:  # SystemExit, or an exception it cannot rebuild
                where = f"tid={list(self.threadIdx)} ctaid={list(self.blockIdx)}"
                failure = RuntimeError(f"{where}: {type(error).__name__}: {error}")
                self.exception = (failure, error.__traceback__)
            finally:
                self._manager.ended(self)

        def syncthreads(self):
            if self.abort:
                raise RuntimeError("abort flag set on syncthreads call")
            self._manager.arrive()
            if self.abort:
                raise RuntimeError("abort flag set on syncthreads clear")

    class BarrierBlockManager:
        """The simulator's BlockManager, with a counted barrier instead of polling."""

        def __init__(self, f, grid_dim, block_dim, debug):
            self._block_dim, self._f, self._debug = block_dim, f, debug  # grid_dim: unused
            self.block_state = np.zeros(block_dim, dtype=np.bool_)
            self._cond = threading.Condition()

        def run(self, grid_point, *args):
            points = np.ndindex(*self._block_dim)
            threads = [BarrierThread(lambda: self._f(*args), self, grid_point, point, self._debug)
                       for point in points]  # fmt: skip
            self._alive, self._waiting, self._round, self._failed = len(threads), 0, 0, None
            for thread in threads:
                thread.start()
            with self._cond:
                while self._alive and self._failed is None:
                    self._cond.wait()
                failed = self._failed
            if failed is not None:
                for other in threads:
                    other.abort = True
                with self._cond:
                    self._round += 1  # wake the threads at the barrier: they see abort
                    self._cond.notify_all()
                raise failed.exception[0].with_traceback(failed.exception[1])

        def arrive(self):
            with self._cond:
                this_round = self._round
                self._waiting += 1
                if self._waiting == self._alive:
                    self._release()
                while this_round == self._round:
                    self._cond.wait()

        def ended(self, thread):
            with self._cond:
                self._alive -= 1
                if thread.exception and self._failed is None:
                    self._failed = thread
                elif self._alive and self._waiting == self._alive:
                    self._release()  # the others wait at a barrier this thread never reached
                self._cond.notify_all()

        def _release(self):
            self._waiting = 0
            self._round += 1
            self._cond.notify_all()

    return BarrierBlockManager
