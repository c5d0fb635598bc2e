"""Weight streaming between MemoryX and the wafer edge, simulated tile by tile.

A training step is a sequence of *segments*, one per layer and pass of the plan: per micro-
batch the forward passes in layer order, then per layer in reverse order ``backward_data``
and ``backward_weight`` (and, where the plan recomputes activations, a block's forward
passes again before its backward: :func:`step_order`). A segment streams its weights in
through the edge ports (forward, recompute and backward_data), computes for its cycles
(measured on the cycle engine, or the plan's analytic estimate) and streams weight gradients
out (backward_weight). Bytes and compute are cut into tiles of at most ``tile_bytes``; each
tile is computed once it has arrived, so the next segment's tiles prefetch while the current
one computes, as far as the on-wafer prefetch buffer allows (a tile's space is freed when
its compute ends). Links are full duplex: weights in and gradients out each get the whole
edge bandwidth. A layer's weights of step ``s + 1`` stream only after all its gradients of
step ``s`` reached MemoryX, where the optimizer applies them (a per-layer dependency: finer-
grained, per-tile updates would hide more).

Nothing is assumed about stalls: compute waiting for weights (``stall``), streaming waiting
for buffer space (``buffer_wait``) and for the optimizer (``update_wait``) come out of the
event times. The closed form "no stall when edge bandwidth >= layer bytes / layer compute
time" is what :func:`no_stall_threshold` gives, for comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from wafersim.compiler.plan import PASSES, RECOMPUTE
from wafersim.compiler.plan_records import GemmPlacement, Plan
from wafersim.compiler.tile_order import IN_PASSES  # weights stream in; backward_weight streams out
from wafersim.memoryx import _stream_jit as K
from wafersim.wafer.errors import ConfigError, excerpt

DEFAULT_TILE_BYTES = 4 * 2**20  # assumption: MemoryX streams in 4 MiB tiles


@dataclass(frozen=True)
class Segment:
    """One layer's pass as the stream sees it."""

    layer: str
    pass_name: str
    in_bytes: int
    out_bytes: int
    compute_cycles: int
    owner: int  # index of the layer whose weights these are, -1 if none
    gemm: bool = False  # a matmul (the closed form's "layer"), not vector work


@dataclass(frozen=True)
class Edge:
    """The wafer's link to MemoryX: bytes per cycle each way, latency, prefetch buffer."""

    bytes_per_cycle: float
    latency_cycles: int
    buffer_bytes: int
    tile_bytes: int = DEFAULT_TILE_BYTES

    def __post_init__(self) -> None:
        for name, value, low in (
            ("bytes_per_cycle", self.bytes_per_cycle, 1e-9),
            ("latency_cycles", self.latency_cycles, 0),
            ("buffer_bytes", self.buffer_bytes, 1),
            ("tile_bytes", self.tile_bytes, 1),
        ):
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not (number and _finite(value) and value >= low):
                raise ConfigError(
                    f"memoryx.{name}={excerpt(value)} must be a finite number >= {low}"
                )
        if self.tile_bytes > self.buffer_bytes:
            raise ConfigError(
                f"memoryx.tile_bytes={self.tile_bytes} must be <= the prefetch buffer "
                f"({self.buffer_bytes} bytes)"
            )


def segments(plan: Plan, compute: dict | None = None, streamed: dict | None = None,
             kept: frozenset[str] = frozenset()):  # fmt: skip
    """The segments of one step of ``plan``; ``compute`` overrides a (layer, pass)'s cycles
    (with measured ones), else the plan's analytic ``kernel_cycles`` count; ``streamed``
    overrides the bytes a (layer, pass) streams in (compressed sparse weights). A recomputed
    forward is its layer's forward again. Layers ``kept`` hold their weights on the wafer from
    their forward to their backward (:func:`kept_on_wafer`): their later passes stream none
    in."""
    compute, streamed = compute or {}, streamed or {}
    layers = plan.layers
    out = []
    for index, pass_name in step_order(plan):
        layer = layers[index]
        placed_as = "forward" if pass_name == RECOMPUTE else pass_name
        placed = layer.passes.get(placed_as)
        if placed is None:
            continue
        key = (layer.name, placed_as)
        edge = streamed.get(key, placed.edge_bytes)
        incoming = placed_as in IN_PASSES
        resident = layer.name in kept and pass_name != "forward"
        out.append(
            Segment(
                layer.name,
                pass_name,
                edge * incoming * (not resident),
                edge * (not incoming),
                compute.get(key, placed.kernel_cycles),
                index if edge else -1,
                isinstance(placed, GemmPlacement),
            )  # fmt: skip
        )
    return out


def step_order(plan: Plan) -> list[tuple[int, str]]:
    """(layer index, pass) in the order a step runs them: per micro-batch the forward passes
    in layer order, then per layer in reverse ``backward_data`` and ``backward_weight``;
    under ``recompute`` a block's forward passes run again as its backward begins."""
    layers, memory = plan.layers, plan.activations
    again = memory.policy == "recompute"
    order = [(i, "forward") for i in range(len(layers))]
    for i in reversed(range(len(layers))):
        block = layers[i].block if again else ""
        if block and (i + 1 == len(layers) or layers[i + 1].block != block):
            first = i
            while first and layers[first - 1].block == block:
                first -= 1
            order += [(j, RECOMPUTE) for j in range(first, i + 1)]
        order += [(i, p) for p in PASSES[1:]]
    return order * memory.micro_batches


def kept_on_wafer(plan: Plan, buffer: int) -> frozenset[str]:
    """The layers that keep their weights on the wafer between their forward and backward, as
    the documented system does with the output layer: the last matmul whose weights stream in
    and the weighted layers after it (its bias), where together they take at most half the
    prefetch buffer ``buffer`` (an assumption: the other half still prefetches the next
    layers' tiles). None kept if they do not fit."""
    names, total = [], 0
    for layer in reversed(plan.layers):
        forward = layer.passes.get("forward")
        if forward is None or not forward.edge_bytes:
            continue
        names.append(layer.name)
        total += forward.edge_bytes
        if isinstance(forward, GemmPlacement):
            break
    return frozenset(names) if 2 * total <= buffer else frozenset()


def weight_bytes(plan: Plan, names: frozenset[str]) -> int:
    """Bytes of the weights of layers ``names`` (their forward's stream)."""
    return sum(lay.passes["forward"].edge_bytes for lay in plan.layers if lay.name in names)


def prefetch_buffer_bytes(plan: Plan, spec) -> int:
    """SRAM of the working grid left over by the activations kept for backward and the
    largest layer's working set: where the next layer's weight tiles can wait."""
    free = plan.working["pes"] * (spec.pe.sram_bytes - plan.activations.bytes_per_pe)
    used = max(p.sram_bytes_per_pe * p.pes for _, _, p in plan.placements())
    return max(1, free - used)


@dataclass(frozen=True)
class StreamResult:
    """Event times per step and segment (``times[s, j, column]``) and their sums."""

    segments: list[Segment]
    times: np.ndarray
    edge: Edge

    @property
    def total_cycles(self) -> int:
        last = self.times[-1]
        return math.ceil(max(last[:, K.COMPUTE_END].max(), last[:, K.OUT_END].max()))

    def link_spans(self, step: int) -> list[tuple[tuple | None, tuple | None]]:
        """Per segment of ``step``: the cycles the edge link spent sending its weights in
        and its gradients out, ``(start, end)`` each, None where it moves none (arrival less
        the link's latency; gradients taken as sent back to back until their last byte)."""
        row, latency, bw = self.times[step], self.edge.latency_cycles, self.edge.bytes_per_cycle
        spans = []
        for j, seg in enumerate(self.segments):
            weights = (row[j, K.IN_START], row[j, K.IN_END] - latency) if seg.in_bytes else None
            sent = row[j, K.OUT_END] - latency
            grads = (sent - seg.out_bytes / bw, sent) if seg.out_bytes else None
            spans.append((weights, grads))
        return spans

    def summary(self) -> dict[str, Any]:
        """Totals over all steps: cycles, stall fraction, edge use, bytes each way."""
        total = self.total_cycles
        t = self.times
        steps = t.shape[0]
        bytes_in = steps * sum(s.in_bytes for s in self.segments)
        bytes_out = steps * sum(s.out_bytes for s in self.segments)
        compute = steps * sum(s.compute_cycles for s in self.segments)
        capacity = 2 * self.edge.bytes_per_cycle * total
        return {
            "total_cycles": total,
            "compute_cycles": compute,
            "stall_cycles": round(float(t[:, :, K.STALL].sum())),
            "stall_fraction": float(t[:, :, K.STALL].sum()) / total if total else 0.0,
            "buffer_wait_cycles": round(float(t[:, :, K.BUFFER_WAIT].sum())),
            "update_wait_cycles": round(float(t[:, :, K.UPDATE_WAIT].sum())),
            "memoryx_bytes_in": bytes_in,
            "memoryx_bytes_out": bytes_out,
            "edge_utilization": (bytes_in + bytes_out) / capacity if capacity else 0.0,
        }

    def per_layer(self) -> list[dict[str, Any]]:
        """Per segment, summed over steps: compute, streaming and stall cycles."""
        t = self.times.sum(axis=0)
        steps = self.times.shape[0]
        bw = self.edge.bytes_per_cycle
        return [
            {
                "layer": seg.layer,
                "pass": seg.pass_name,
                "compute_cycles": steps * seg.compute_cycles,
                "stream_in_cycles": math.ceil(steps * seg.in_bytes / bw),
                "stream_out_cycles": math.ceil(steps * seg.out_bytes / bw),
                "stall_cycles": round(float(t[j, K.STALL])),
                "buffer_wait_cycles": round(float(t[j, K.BUFFER_WAIT])),
                "update_wait_cycles": round(float(t[j, K.UPDATE_WAIT])),
                "in_bytes": steps * seg.in_bytes,
                "out_bytes": steps * seg.out_bytes,
            }
            for j, seg in enumerate(self.segments)
        ]


def simulate_stream(segs: list[Segment], edge: Edge, steps: int) -> StreamResult:
    """Run the tile-level stream of ``steps`` steps; see the module docstring."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ConfigError(f"steps={excerpt(steps)} must be an integer >= 1")
    if not segs:
        raise ConfigError("the plan has no layers to stream")
    in_b = np.array([s.in_bytes for s in segs], np.float64)
    out_b = np.array([s.out_bytes for s in segs], np.float64)
    tiles = np.maximum(1, np.ceil(np.maximum(in_b, out_b) / edge.tile_bytes)).astype(np.int64)
    times = K.stream_steps(
        in_b,
        out_b,
        np.array([s.compute_cycles for s in segs], np.float64),
        tiles,
        np.array([s.owner for s in segs], np.int64),
        steps,
        float(edge.bytes_per_cycle),
        float(edge.latency_cycles),
        float(edge.buffer_bytes),
    )
    return StreamResult(segs, times, edge)


def no_stall_threshold(segs: list[Segment], edge: Edge) -> float:
    """The closed form's verdict: the largest ratio, over the matmuls that stream weights,
    of stream-in time (weight bytes / edge bandwidth) to compute time; above 1 the closed form
    predicts a stall. Vector work (biases, norms) is left out: its few bytes prefetch."""
    ratios = [
        s.in_bytes / edge.bytes_per_cycle / s.compute_cycles
        for s in segs
        if s.gemm and s.in_bytes and s.compute_cycles
    ]
    return max(ratios, default=0.0)


def _finite(value: float) -> bool:
    """Whether ``value`` is a finite float: an integer too large for one is not."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
