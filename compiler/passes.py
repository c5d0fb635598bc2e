"""What each layer asks of the wafer in each pass, as GEMMs or vector work with shapes.

Passes: ``forward`` (``Y = X W``: ``m`` = tokens, ``k`` = in, ``n`` = out), ``backward_data``
(``dX = dY W^T``: ``m`` = tokens, ``k`` = out, ``n`` = in) and ``backward_weight``
(``dW = X^T dY``: ``m`` = in, ``k`` = tokens, ``n`` = out). Weights stream in from MemoryX in
the first two and weight gradients stream out in the third: those bytes cross the wafer edge.
Attention's batched matmuls (one per sequence and head) have no weights; their backward pass
is counted as two GEMMs of the forward shape (the same FLOPs as ``dA`` and ``dB``). A layer
fed only by the model input (or nothing) needs no ``backward_data``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from wafersim.compiler.graph import Layer
from wafersim.fabric.program import value_bytes
from wafersim.wafer.dtypes import DType

# assumption: vector operations per value (forward; backward costs the same again)
VECTOR_OPS_PER_VALUE = {
    "bias": 1, "relu": 1, "gelu": 8, "swiglu": 6, "add": 1, "layernorm": 8, "rmsnorm": 5,
    "softmax": 5, "loss": 6, "embedding": 1, "position_embedding": 1,
}  # fmt: skip
# ops whose values are normalised per token: a reduction across the PEs holding the token
ROW_REDUCING = ("layernorm", "rmsnorm", "softmax", "loss")
DX_NEEDS_PARAMS = ("layernorm", "rmsnorm")  # dX = f(dY, gamma); a bias's dX is dY


@dataclass(frozen=True)
class Gemm:
    """``count`` independent ``C = A @ B`` (``m x k`` times ``k x n``); ``density``: the share
    of ``B``'s values that are nonzero (pruned weights streamed in)."""

    m: int
    k: int
    n: int
    count: int
    edge_bytes: int  # weights in, or weight gradients out, through MemoryX
    density: float = 1.0


@dataclass(frozen=True)
class Vector:
    """Element-wise work over ``tokens x features`` values, optionally reduced per token."""

    tokens: int
    features: int
    ops_per_value: int
    per_token_reduce: bool
    edge_bytes: int


Work = Gemm | Vector


def layer_passes(
    layer: Layer, batch: int, seq: int, dtype: DType, density: float = 1.0
) -> dict[str, Work]:
    """The work of ``layer`` per pass for ``batch`` sequences of ``seq`` tokens, its weights
    pruned to ``density``: the passes that stream them in carry the density and the dense
    bytes (how they stream depends on the strategy: :func:`compiler.placement.as_run`);
    only the kept weights' gradients stream out (MemoryX holds the mask); ``dW`` is
    computed dense."""
    tokens, size = batch * seq, value_bytes(dtype)
    needs_dx = any(name != "input" for name in layer.inputs)
    if layer.weights is not None:
        k, n = layer.weights
        edge = k * n * size
        passes = {"forward": Gemm(tokens, k, n, 1, edge, density)}
        if needs_dx:
            passes["backward_data"] = Gemm(tokens, n, k, 1, edge, density)
        passes["backward_weight"] = Gemm(k, tokens, n, 1, math.ceil(k * n * size * density))
        return passes
    if layer.attention is not None and layer.op == "matmul":
        kind, heads, head_dim = layer.attention
        k, n = (head_dim, seq) if kind == "scores" else (seq, head_dim)
        return {
            "forward": Gemm(seq, k, n, batch * heads, 0),
            "backward_data": Gemm(seq, k, n, 2 * batch * heads, 0),
        }
    return _vector_passes(layer, tokens, seq, size, needs_dx)


def _vector_passes(layer: Layer, tokens: int, seq: int, size: int, needs_dx: bool):
    features = layer.features
    if layer.attention is not None:  # softmax over heads x seq scores per token
        features = layer.attention[1] * seq
    if layer.op == "loss":  # softmax cross-entropy over the logits
        features = layer.in_features
    param_bytes = layer.params * size
    if layer.op == "embedding":  # only the looked-up rows cross the edge
        param_bytes = tokens * layer.features * size
    work = Vector(
        tokens, features, VECTOR_OPS_PER_VALUE[layer.op], layer.op in ROW_REDUCING, param_bytes
    )
    passes: dict[str, Work] = {"forward": work}
    if needs_dx:  # only a norm's input gradient needs its parameters (the scale) again
        dx_bytes = param_bytes if layer.op in DX_NEEDS_PARAMS else 0
        passes["backward_data"] = dataclasses.replace(work, edge_bytes=dx_bytes)
    if layer.params:
        passes["backward_weight"] = work
    return passes
