"""SwarmX: the broadcast-reduce tree between MemoryX and the wafers of a data-parallel cluster.

S. Lie, "Multi-Million Core, Multi-Wafer AI Cluster", Hot Chips 33 (2021): SwarmX is a tree
of broadcast/reduce nodes; MemoryX's weights are broadcast through it to every CS-2 and the
CS-2s' gradients are summed on the way back, so MemoryX sees one wafer's worth of traffic
whatever the number of wafers (up to 192 CS-2s).

Timing model (pipelined store-and-forward in packets). With ``W`` wafers the tree has
``L = tree_levels(W, io.swarmx_fanout)`` levels of nodes (``L = 0``: MemoryX attaches to the
wafer directly). A tensor of ``n`` bytes streams at the slowest link on the path,
``r = min(swarmx link, wafer edge)`` bytes per cycle (just the wafer edge when ``L = 0``);
each level holds a packet back for its latency plus the time to receive the packet::

    cycles(n, W) = ceil(n / r) + io.edge_latency_cycles
                   + L * (io.swarmx_level_latency_cycles + ceil(PACKET_BYTES / swarmx link))

Reduction uses the links' other direction and nodes that add at line rate (an assumption),
so a gradient tensor takes the same time up the tree as a weight tensor down it. Every level
charges a whole packet, even for a tensor smaller than one (an upper bound).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from wafersim.wafer.errors import ConfigError, excerpt
from wafersim.wafer.spec import IOSpec, WaferSpec

MAX_WAFERS = 4096  # model bound; [HC33] quotes clusters of up to 192 CS-2s
PACKET_BYTES = 1500  # assumption: SwarmX packet size is not published; one Ethernet MTU
NP_DTYPE = np.float32  # gradients are summed in float32
_FANOUT_META = next(f for f in dataclasses.fields(IOSpec) if f.name == "swarmx_fanout").metadata
_FANOUT_RANGE = (_FANOUT_META["low"], _FANOUT_META["high"])  # the knob's own range


def tree_levels(wafers: int, fanout: int) -> int:
    """Levels of broadcast/reduce nodes between MemoryX and ``wafers`` leaves.

    ``0`` for one wafer (MemoryX attaches directly), else ``ceil(log_fanout(wafers))``,
    computed exactly as the least ``L`` with ``fanout ** L >= wafers``.
    """
    _check_int("wafers", wafers, 1, MAX_WAFERS)
    _check_int("fanout", fanout, *_FANOUT_RANGE)
    levels, leaves = 0, 1
    while leaves < wafers:
        levels, leaves = levels + 1, leaves * fanout
    return levels


def effective_edge(spec: WaferSpec, wafers: int) -> tuple[float, int]:
    """(bytes per cycle, latency cycles) one of ``wafers`` wafers sees for streamed weights.

    A streaming simulator charges ``ceil(n / bytes_per_cycle) + latency_cycles`` for a tensor
    of ``n`` bytes; with one wafer this is the plain wafer edge.
    """
    levels = tree_levels(wafers, spec.io.swarmx_fanout)
    if levels == 0:
        return spec.edge_bytes_per_cycle, spec.io.edge_latency_cycles
    link = swarmx_link_bytes_per_cycle(spec)
    per_level = spec.io.swarmx_level_latency_cycles + math.ceil(PACKET_BYTES / link)
    return min(link, spec.edge_bytes_per_cycle), spec.io.edge_latency_cycles + levels * per_level


def broadcast_cycles(n_bytes: int, wafers: int, spec: WaferSpec) -> int:
    """Cycles for a weight tensor of ``n_bytes`` to reach every one of ``wafers`` wafers."""
    _check_int("n_bytes", n_bytes, 0, math.inf)
    bytes_per_cycle, latency = effective_edge(spec, wafers)
    return math.ceil(n_bytes / bytes_per_cycle) + latency


def reduce_cycles(n_bytes: int, wafers: int, spec: WaferSpec) -> int:
    """Cycles for ``wafers`` gradient tensors of ``n_bytes`` each to arrive summed at MemoryX.

    The tree is symmetric (full-duplex links, adders at line rate), so this equals
    :func:`broadcast_cycles`.
    """
    return broadcast_cycles(n_bytes, wafers, spec)


def swarmx_link_bytes_per_cycle(spec: WaferSpec) -> float:
    """One SwarmX link, one direction, in bytes per fabric clock cycle."""
    return spec.io.swarmx_link_bits_per_s / 8.0 / spec.clock_hz


def reduce_gradients(per_wafer: list[dict[str, np.ndarray]], fanout: int) -> dict[str, np.ndarray]:
    """The gradients of all wafers summed as the tree does it, in float32.

    Level by level from the leaves: children ``[k * fanout, (k + 1) * fanout)`` are summed in
    order at node ``k`` until one sum is left. Deterministic: the same inputs give the same
    bits. Every wafer must give the same tensor names, shapes and floating dtypes.
    """
    _check_int("fanout", fanout, *_FANOUT_RANGE)
    level = _check_gradients(per_wafer)
    while len(level) > 1:
        level = [_sum_group(level[k : k + fanout]) for k in range(0, len(level), fanout)]
    return level[0]


def _sum_group(children: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The children's sum, accumulated in order into the first child (a private copy)."""
    total = children[0]
    for child in children[1:]:
        for name, grad in child.items():
            total[name] += grad
    return total


def _check_gradients(per_wafer: object) -> list[dict[str, np.ndarray]]:
    """Float32 copies of every wafer's gradients, after checking names and shapes."""
    if not isinstance(per_wafer, list) or not per_wafer:
        raise ConfigError(f"per_wafer is {excerpt(per_wafer)}; allowed: a non-empty list of dicts")
    _check_int("wafers", len(per_wafer), 1, MAX_WAFERS)
    out = []
    for index, grads in enumerate(per_wafer):
        if not isinstance(grads, dict) or not grads:
            raise ConfigError(f"per_wafer[{index}] is {excerpt(grads)}; allowed: a non-empty dict")
        out.append({name: _as_fp32(index, name, grad) for name, grad in grads.items()})
    first = out[0]
    for index, grads in enumerate(out[1:], start=1):
        if set(grads) != set(first):
            raise ConfigError(
                f"per_wafer[{index}] names {sorted(grads)}; allowed: {sorted(first)} "
                "(the names of per_wafer[0])"
            )
        for name, grad in grads.items():
            if grad.shape != first[name].shape:
                raise ConfigError(
                    f"per_wafer[{index}][{excerpt(name)}] has shape {grad.shape}; "
                    f"allowed: {first[name].shape} (the shape in per_wafer[0])"
                )
    return out


def _as_fp32(index: int, name: object, grad: object) -> np.ndarray:
    array = np.asarray(grad)
    if not np.issubdtype(array.dtype, np.floating):
        raise ConfigError(
            f"per_wafer[{index}][{excerpt(name)}] has dtype {array.dtype}; allowed: a floating "
            "dtype"
        )
    return np.array(array, dtype=NP_DTYPE, copy=True)


def scaling(
    step_cycles_per_wafer: list[int],
    stream_bytes_per_step: int,
    grad_bytes_per_step: int,
    spec: WaferSpec,
) -> dict[str, Any]:
    """Data-parallel scaling over ``N = len(step_cycles_per_wafer)`` wafers through SwarmX.

    Each wafer has its own step time (its own defect map); the wafers step in lock-step, so
    the slowest sets the pace. Weights stream down and gradients up on the links' two
    directions at once, overlapped with compute, so a step takes::

        step_cycles(N) = max(max(per-wafer cycles),
                             broadcast_cycles(stream bytes, N), reduce_cycles(grad bytes, N))

    and processes ``N`` times the samples of one wafer. ``speedup = N * step_cycles(1) /
    step_cycles(N)`` with ``step_cycles(1)`` one wafer with the first entry's cycles, and
    ``efficiency = speedup / N``. ``slowest_wafer`` is the index of the largest entry (the
    first one on ties).
    """
    cycles = _check_step_cycles(step_cycles_per_wafer)
    _check_int("stream_bytes_per_step", stream_bytes_per_step, 0, math.inf)
    _check_int("grad_bytes_per_step", grad_bytes_per_step, 0, math.inf)
    wafers = len(cycles)
    down = broadcast_cycles(stream_bytes_per_step, wafers, spec)
    up = reduce_cycles(grad_bytes_per_step, wafers, spec)
    step = max(max(cycles), down, up)
    one = max(
        cycles[0],
        broadcast_cycles(stream_bytes_per_step, 1, spec),
        reduce_cycles(grad_bytes_per_step, 1, spec),
    )
    speedup = wafers * one / step
    return {
        "wafers": wafers,
        "step_cycles": step,
        "slowest_wafer": cycles.index(max(cycles)),
        "speedup": speedup,
        "efficiency": speedup / wafers,
        "broadcast_cycles": down,
        "reduce_cycles": up,
    }


def _check_step_cycles(values: object) -> list[int]:
    if not isinstance(values, list | tuple) or not values:
        raise ConfigError(
            f"step_cycles_per_wafer is {excerpt(values)}; allowed: a non-empty list of ints >= 1"
        )
    _check_int("wafers", len(values), 1, MAX_WAFERS)
    for index, value in enumerate(values):
        _check_int(f"step_cycles_per_wafer[{index}]", value, 1, math.inf)
    return [int(value) for value in values]


def _check_int(field: str, value: object, low: float, high: float) -> None:
    ok = isinstance(value, int | np.integer) and not isinstance(value, bool)
    if not ok or not low <= value <= high:
        raise ConfigError(
            f"{field} is {excerpt(value)}; allowed: an integer in [{low:g}, {high:g}]"
        )
