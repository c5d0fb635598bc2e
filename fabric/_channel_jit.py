"""Numba-compiled function behind :mod:`fabric.channel_deps`: Kahn's algorithm over a route table.

Channels are the input queues ``(pe, in_port, color)``, numbered ``(pe * 5 + in_port) * C +
color``; a channel depends on the channel across each link output of its route. The function
takes and returns only arrays and never raises user-facing errors.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from wafersim.wafer.geometry import NUM_DIRS, OPPOSITE

_OPPOSITE = tuple(int(v) for v in OPPOSITE)


@njit(cache=True)
def unresolved_channels(table: np.ndarray, neighbor: np.ndarray):
    """Which channels a topological order of the dependency graph cannot reach.

    Parameters
    ----------
    table : uint8 (P, 5, C)
        Output-port mask per input port and color (``fabric.routes.ColorRoutes.table``).
    neighbor : int64 (P, 4)
        PE across each link; every link a route uses must exist (the caller checks).

    Returns
    -------
    stuck : bool (P * 5 * C,)
        Channels left once every channel that no remaining channel feeds has been removed
        (Kahn's algorithm): those on a dependency cycle and those downstream of one. None
        is stuck exactly when the graph is acyclic.
    received : bool (P * 5 * C,)
        Channels some route feeds over a link.
    """
    _, ports, colors = table.shape
    masks = table.ravel()
    pending = np.zeros(masks.size, np.int32)
    for channel in range(masks.size):
        for d in range(NUM_DIRS):
            if masks[channel] & (1 << d):
                pending[_downstream(neighbor, channel, d, ports, colors)] += 1
    received = pending > 0
    queue = np.empty(masks.size, np.int64)
    tail = 0
    for channel in range(masks.size):
        if pending[channel] == 0:
            queue[tail] = channel
            tail += 1
    for head in range(masks.size):
        if head == tail:
            break
        channel = queue[head]
        for d in range(NUM_DIRS):
            if masks[channel] & (1 << d):
                there = _downstream(neighbor, channel, d, ports, colors)
                pending[there] -= 1
                if pending[there] == 0:
                    queue[tail] = there
                    tail += 1
    return pending > 0, received


@njit(cache=True, inline="always")
def _downstream(neighbor, channel, d, ports, colors):
    """The channel across link ``d`` that ``channel`` feeds: same color, opposite port."""
    pe = channel // (ports * colors)
    return (neighbor[pe, d] * ports + _OPPOSITE[d]) * colors + channel % colors
