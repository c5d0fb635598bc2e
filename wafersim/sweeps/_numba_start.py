"""Numba's one-off set-up in a process, run when a caller chooses (``wafersim.sweeps.run``)."""

from numba import njit


@njit(cache=True)
def first_call() -> int:
    """The first call of any Numba function in a process sets Numba up, which takes a
    noticeable moment."""
    return 0
