"""Activations kept for the backward pass: how many bytes, and how a plan makes them fit.

In weight streaming the activations stay on the wafer: what each layer's backward pass reads
from its forward pass waits in SRAM from the forward pass until that layer's backward pass.
At the end of the forward pass they are all there at once, so a plan reserves that peak on
every working PE (spread evenly: the layers move, the kept tensors stay where they are) and
places each layer in what is left.

Policies, each with ``micro_batches`` (the batch split into equal parts that each run
forward and backward with their own weight streams; MemoryX sums their gradients):

* ``keep``: every layer keeps what its backward pass reads.
* ``recompute``: a repeated block (a transformer layer) keeps only the tensors that enter it
  (a checkpoint); in the backward pass its forward runs again, weights streamed again, just
  before its backward (activation checkpointing, Chen et al. 2016, arXiv:1604.06174). The
  peak is every checkpoint plus one block's kept tensors.
* ``ignore``: nothing is reserved, as if the activations lived elsewhere: for studies of the
  weight stream alone (published no-stall analyses leave activations out). Never chosen by
  ``auto``; the plan names it.

What a layer's backward reads (values per token): a matmul its input ``X`` (for
``dW = X^T dY``); attention's scores matmul q, k and v, its softmax its output ``P`` (which
the context matmul reads too); an activation, a norm or the loss its input; a bias, a
residual add or an embedding nothing.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from wafersim.compiler.graph import Layer, LayerGraph
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.errors import ConfigError, excerpt

POLICIES = ("keep", "recompute")  # what ``auto`` chooses from
CHOICES = ("auto", *POLICIES, "ignore")
NOTHING_KEPT = ("bias", "add", "embedding", "position_embedding")


def check_options(policy: object, micro_batches: object) -> None:
    """Reject an unknown policy or a bad micro-batch count, naming the field."""
    if policy not in CHOICES:
        raise ConfigError(f"activations={excerpt(policy)} must be one of: {', '.join(CHOICES)}")
    bad = isinstance(micro_batches, bool) or not isinstance(micro_batches, int | None)
    if bad or (micro_batches is not None and not 1 <= micro_batches <= 10**9):
        raise ConfigError(f"micro_batches={excerpt(micro_batches)} must be null (auto) or an "
                          "integer in [1, 10**9] dividing batch")  # fmt: skip


def has_backward(layer: Layer) -> bool:
    """Whether the layer has a backward pass (parameters, or an input to differentiate)."""
    return bool(layer.params) or any(name != "input" for name in layer.inputs)


def saved_tensors(layer: Layer, seq: int, widths: dict[str, int]) -> dict[str, int]:
    """The tensors the layer's backward pass reads from its forward pass (named by the layer
    that makes them, ``input`` for the model's), and their values per token."""
    if not has_backward(layer) or layer.op in NOTHING_KEPT:
        return {}
    if layer.attention is not None and layer.attention[0] != "scores":
        heads = layer.attention[1]  # softmax keeps its output P; context reads P and v,
        return {layer.name: heads * seq} if layer.attention[0] == "softmax" else {}  # kept
    return {source: widths[source] for source in layer.inputs}


@dataclass(frozen=True)
class Run:
    """Consecutive layers of one repeated block: what enters it, what its layers keep."""

    block: str
    layers: tuple[str, ...]
    entering: frozenset[str]
    kept: frozenset[str]


@dataclass(frozen=True)
class Kept:
    """What one sequence keeps for backward: every tensor's bytes, the first layer keeping
    each kept tensor (a tensor read by several layers is kept once) and the blocks' runs."""

    sizes: dict[str, int]
    keeper: dict[str, str]
    runs: tuple[Run, ...]

    def peak(self, policy: str) -> int:
        """The most bytes one sequence holds at once under ``policy``: at the end of the
        forward pass, or under ``recompute`` while the widest block runs its backward."""
        if policy == "ignore":
            return 0
        if policy == "keep":
            return self.bytes(self.keeper)
        base = self.always_kept()
        widest = max((self.bytes(run.kept - base) for run in self.runs), default=0)
        return self.bytes(base) + widest

    def always_kept(self) -> set[str]:
        """Under ``recompute``: the checkpoints and what layers outside the blocks keep."""
        inside = {name for run in self.runs for name in run.layers}
        outside = {t for t, layer in self.keeper.items() if layer not in inside}
        return outside | {t for run in self.runs for t in run.entering}

    def checkpoint_bytes(self) -> int:
        return self.bytes({t for run in self.runs for t in run.entering})

    def bytes(self, tensors) -> int:
        return sum(self.sizes[t] for t in tensors)

    def largest(self) -> tuple[str, int]:
        """The layer that keeps the most, and its bytes per sequence."""
        per_layer: dict[str, int] = {}
        for tensor, layer in self.keeper.items():
            per_layer[layer] = per_layer.get(layer, 0) + self.sizes[tensor]
        return max(per_layer.items(), key=lambda item: item[1], default=("", 0))


def kept_per_sequence(graph: LayerGraph, seq: int, value_bytes: int) -> Kept:
    """What one sequence of ``seq`` tokens keeps, tensor by tensor and block by block."""
    widths = {lay.name: lay.features for lay in graph.layers} | {"input": graph.input_features}
    saved = {lay.name: saved_tensors(lay, seq, widths) for lay in graph.layers}
    sizes = {name: seq * width * value_bytes for name, width in widths.items()}
    keeper: dict[str, str] = {}
    for layer in graph.layers:
        for tensor, width in saved[layer.name].items():
            sizes[tensor] = seq * width * value_bytes  # softmax's P: heads * seq wide
            keeper.setdefault(tensor, layer.name)
    return Kept(sizes, keeper, tuple(_runs(graph.layers, saved)))


def _runs(layers, saved: dict[str, dict[str, int]]):
    """The runs of consecutive layers that share a block (a nested repeat splits its outer
    block into the runs before and after the inner one)."""
    for block, group in itertools.groupby(layers, key=lambda lay: lay.block):
        group = list(group)
        if not block:
            continue
        names = {lay.name for lay in group}
        entering = {src for lay in group for src in lay.inputs if src not in names}
        kept = {t for lay in group for t in saved[lay.name]}
        yield Run(block, tuple(lay.name for lay in group), frozenset(entering), frozenset(kept))


def candidates(kept: Kept, batch: int, policy: str, micro_batches: int | None):
    """(policy, micro-batches) to try, in order: the policies asked for (``auto``: both,
    ``recompute`` only where the model has repeated blocks), each with every divisor of
    ``batch`` from the smallest (or only the one asked for)."""
    if policy == "recompute" and not kept.runs:
        raise ConfigError("activations='recompute' needs repeated blocks in the model (none)")
    policies = [policy] if policy != "auto" else ["keep"] + (["recompute"] * bool(kept.runs))
    if micro_batches is not None and batch % micro_batches:
        raise ConfigError(f"micro_batches={micro_batches} must divide batch={batch}")
    counts = [micro_batches] if micro_batches else divisors(batch)
    return [(p, m) for p in policies for m in counts]


def divisors(n: int) -> list[int]:
    """The divisors of ``n``, ascending."""
    low = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return low + [n // d for d in reversed(low) if d * d != n]


def reserved_per_pe(kept: Kept, policy: str, sequences: int, pes: int) -> int:
    """Bytes every working PE sets aside for ``sequences`` sequences' kept activations."""
    return ceil_div(sequences * kept.peak(policy), pes)


def too_big(kept: Kept, sequences: int, pes: int, sram_bytes: int, policy: str,
            forced: int | None) -> ConfigError:  # fmt: skip
    """The error when no policy and micro-batch count fits ``sequences`` per micro-batch
    (one, or what a ``forced`` micro-batch count leaves): the layer that keeps most, the
    bytes per PE needed, what is available, what would help."""
    layer, largest = kept.largest()
    allowed = (POLICIES if kept.runs else ("keep",)) if policy == "auto" else (policy,)
    best = min(allowed, key=kept.peak)
    need = reserved_per_pe(kept, best, sequences, pes)
    where = (
        f"in micro_batches={forced} of {sequences} sequence(s); leave micro_batches unset "
        "to let the compiler split the batch further, or use"
        if forced
        else "even with one sequence per micro-batch; use"
    )
    recompute = "activations=recompute, " if policy == "keep" and kept.runs else ""
    return ConfigError(
        f"activations kept for backward do not fit: {sequences} sequence(s) need {need} "
        f"bytes per PE ({best}; layer {layer!r} keeps the most, {largest} bytes per "
        f"sequence), available {sram_bytes} (pe.sram_bytes) less each layer's own working "
        f"set, {where} a shorter seq, {recompute}or a wafer with more SRAM"
    )
