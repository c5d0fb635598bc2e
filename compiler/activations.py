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

import math
from dataclasses import dataclass

from compiler.graph import Layer, LayerGraph
from wafer.errors import ConfigError

POLICIES = ("keep", "recompute")  # what ``auto`` chooses from
CHOICES = ("auto", *POLICIES, "ignore")
NOTHING_KEPT = ("bias", "add", "embedding", "position_embedding")


def check_options(policy: object, micro_batches: object) -> None:
    """Reject an unknown policy or a bad micro-batch count, naming the field."""
    if policy not in CHOICES:
        raise ConfigError(f"activations={policy!r} must be one of: {', '.join(CHOICES)}")
    bad = isinstance(micro_batches, bool) or not isinstance(micro_batches, int | None)
    if bad or (micro_batches is not None and not 1 <= micro_batches <= 10**9):
        raise ConfigError(f"micro_batches={micro_batches!r} must be null (auto) or an integer "
                          "in [1, 10**9] dividing batch")  # fmt: skip


def has_backward(layer: Layer) -> bool:
    """Whether the layer has a backward pass (parameters, or an input to differentiate)."""
    return bool(layer.params) or any(name != "input" for name in layer.inputs)


def saved_values(layer: Layer, seq: int) -> int:
    """Values per token the layer's backward pass reads from its forward pass."""
    if not has_backward(layer) or layer.op in NOTHING_KEPT:
        return 0
    if layer.attention is not None:
        kind, heads, _ = layer.attention
        return {"scores": layer.in_features, "softmax": heads * seq, "context": 0}[kind]
    return layer.in_features or layer.features


@dataclass(frozen=True)
class Kept:
    """Bytes kept for backward by one sequence, per layer and per checkpoint."""

    per_layer: dict[str, int]
    checkpoints: dict[str, int]  # block -> bytes of the tensors entering it
    blocks: dict[str, tuple[str, ...]]  # block -> its layers, in order

    def peak(self, policy: str) -> int:
        """Bytes one sequence keeps at the end of its forward pass under ``policy``."""
        if policy == "ignore":
            return 0
        if policy == "keep":
            return sum(self.per_layer.values())
        inside = {name for names in self.blocks.values() for name in names}
        outside = sum(b for name, b in self.per_layer.items() if name not in inside)
        widest = max((sum(self.per_layer[n] for n in names) for names in self.blocks.values()),
                     default=0)  # fmt: skip
        return outside + sum(self.checkpoints.values()) + widest

    def largest(self) -> tuple[str, int]:
        """The layer that keeps the most, and its bytes per sequence."""
        return max(self.per_layer.items(), key=lambda item: item[1], default=("", 0))


def kept_per_sequence(graph: LayerGraph, seq: int, value_bytes: int) -> Kept:
    """What one sequence of ``seq`` tokens keeps, layer by layer and block by block."""
    per_layer = {lay.name: seq * saved_values(lay, seq) * value_bytes for lay in graph.layers}
    blocks: dict[str, list[Layer]] = {}
    for layer in graph.layers:
        if layer.block:
            blocks.setdefault(layer.block, []).append(layer)
    widths = {lay.name: lay.features for lay in graph.layers} | {"input": graph.input_features}
    checkpoints = {}
    for block, layers in blocks.items():
        names = {lay.name for lay in layers}
        entering = {src for lay in layers for src in lay.inputs if src not in names}
        checkpoints[block] = seq * sum(widths[src] for src in entering) * value_bytes
    named = {block: tuple(lay.name for lay in layers) for block, layers in blocks.items()}
    return Kept(per_layer, checkpoints, named)


def candidates(kept: Kept, batch: int, policy: str, micro_batches: int | None):
    """(policy, micro-batches) to try, in order: the policies asked for (``auto``: both,
    ``recompute`` only where the model has repeated blocks), each with every divisor of
    ``batch`` from the smallest (or only the one asked for)."""
    if policy == "recompute" and not kept.blocks:
        raise ConfigError("activations='recompute' needs repeated blocks in the model (none)")
    policies = [policy] if policy != "auto" else ["keep"] + (["recompute"] * bool(kept.blocks))
    if micro_batches is not None and batch % micro_batches:
        raise ConfigError(f"micro_batches={micro_batches} must divide batch={batch}")
    counts = [micro_batches] if micro_batches else [d for d in range(1, batch + 1)
                                                    if batch % d == 0]  # fmt: skip
    return [(p, m) for p in policies for m in counts]


def reserved_per_pe(kept: Kept, policy: str, sequences: int, pes: int) -> int:
    """Bytes every working PE sets aside for ``sequences`` sequences' kept activations."""
    return math.ceil(sequences * kept.peak(policy) / pes)


def too_big(kept: Kept, batch: int, pes: int, sram_bytes: int, policy: str) -> ConfigError:
    """The error when no policy and micro-batch count fits: the layer that keeps most, the
    bytes per PE one sequence needs, what is available, what would help."""
    layer, largest = kept.largest()
    best = (
        min(POLICIES if kept.blocks else ("keep",), key=kept.peak) if policy == "auto" else policy
    )
    need = reserved_per_pe(kept, best, 1, pes)
    return ConfigError(
        f"activations kept for backward do not fit: one sequence needs {need} bytes per PE "
        f"({best}; layer {layer!r} keeps the most, {largest} bytes per sequence), available "
        f"{sram_bytes} (pe.sram_bytes) less each layer's own working set, even with one "
        f"sequence per micro-batch (batch={batch}); use a shorter seq, "
        f"{'activations=recompute, ' if policy == 'keep' and kept.blocks else ''}"
        "or a wafer with more SRAM"
    )
