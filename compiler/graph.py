"""The layer graph: typed ops with per-token feature widths, parameters and GEMM shapes.

A tensor between layers is ``(tokens, features)`` with ``tokens = batch * seq`` fixed only at
compile time, so a graph holds feature widths and the compiler turns them into shapes. Each
op kind in :data:`OPS` checks its fields and inputs and expands into one or more
:class:`Layer` objects (attention into its two batched matmuls around a softmax; a linear
with ``bias: true`` into a matmul and a bias).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wafersim.wafer.errors import ConfigError, excerpt


@dataclass(frozen=True)
class Layer:
    """One op of the graph.

    ``weights`` is ``(in, out)`` of a matmul whose weights stream from MemoryX (tied ones
    too), ``params`` counts the parameters this layer owns. ``attention`` is set on the
    layers of attention: ``("scores" | "softmax" | "context", heads, head_dim)``; the first
    two have ``heads * seq`` features per token (``features`` 0: known at compile time).
    """

    name: str
    op: str
    inputs: tuple[str, ...]
    features: int
    params: int = 0
    weights: tuple[int, int] | None = None
    attention: tuple[str, int, int] | None = None
    in_features: int = 0  # summed widths of the inputs
    block: str = ""  # the repeated block instance it belongs to ("h.3"; "": none)


@dataclass(frozen=True)
class LayerGraph:
    """A model's layers in execution order, and the features of its input."""

    name: str
    layers: tuple[Layer, ...]
    input_features: int
    context: int

    def __post_init__(self) -> None:
        """Refuse a layer name used twice: inputs, plans and weights look layers up by name."""
        first: dict[str, int] = {}
        for index, layer in enumerate(self.layers):
            if first.setdefault(layer.name, index) != index:
                raise ConfigError(
                    f"layer {layer.name!r} is defined twice: layers[{first[layer.name]}] and "
                    f"layers[{index}] of model {self.name!r}; layer names must be unique"
                )

    @property
    def params(self) -> int:
        return sum(layer.params for layer in self.layers)


# An op builder gets (name, fields, input widths) and returns its layers, the last one the
# op's output. ``fields`` are already evaluated to integers or booleans.
OpBuilder = Callable[[str, dict[str, Any], list[int]], list[Layer]]


def _take(name: str, op: str, fields: dict[str, Any], required=(), optional=()) -> None:
    """Reject unknown and missing fields of op ``name``."""
    unknown = set(fields) - set(required) - set(optional)
    if unknown:
        allowed = ", ".join(sorted({*required, *optional})) or "none"
        raise ConfigError(
            f"layer {name!r} ({op}): unknown field(s) {', '.join(sorted(unknown))}; "
            f"allowed: {allowed}"
        )
    missing = [key for key in required if key not in fields]
    if missing:
        raise ConfigError(f"layer {name!r} ({op}): missing field(s) {', '.join(missing)}")


def _inputs(name: str, op: str, widths: list[int], count: int) -> None:
    if len(widths) != count:
        raise ConfigError(f"layer {name!r} ({op}) takes {count} input(s), got {len(widths)}")


def _same(name: str, op: str, widths: list[int]) -> int:
    if len(set(widths)) != 1:
        raise ConfigError(f"layer {name!r} ({op}): input widths {widths} must be equal")
    return widths[0]


def _linear(name: str, fields: dict[str, Any], widths: list[int]) -> list[Layer]:
    _take(name, "linear", fields, ("out",), ("in", "bias", "tied"))
    _inputs(name, "linear", widths, 1)
    k, n = widths[0], fields["out"]
    if fields.get("in", k) != k:
        raise ConfigError(f"layer {name!r} (linear): in={fields['in']} but its input has {k}")
    own = 0 if fields.get("tied") else k * n
    layers = [Layer(name, "linear", (), n, own, weights=(k, n))]
    if fields.get("bias"):
        layers.append(Layer(f"{name}.bias", "bias", (name,), n, n))
    return layers


def _attention(name: str, fields: dict[str, Any], widths: list[int]) -> list[Layer]:
    _take(name, "attention", fields, ("heads",), ("kv_heads", "head_dim"))
    heads = fields["heads"]
    kv_heads = fields.get("kv_heads", heads)
    head_dim = fields.get("head_dim", sum(widths) // (heads + 2 * kv_heads))
    if heads % kv_heads or sum(widths) != (heads + 2 * kv_heads) * head_dim:
        raise ConfigError(
            f"layer {name!r} (attention): inputs {widths} must hold q, k and v of {heads} "
            f"heads and {kv_heads} kv_heads (a divisor of heads) of head_dim {head_dim}"
        )
    return [
        Layer(f"{name}.scores", "matmul", (), 0, attention=("scores", heads, head_dim)),
        Layer(f"{name}.softmax", "softmax", (f"{name}.scores",), 0,
              attention=("softmax", heads, head_dim)),
        Layer(f"{name}.context", "matmul", (f"{name}.softmax",), heads * head_dim,
              attention=("context", heads, head_dim)),
    ]  # fmt: skip


def _simple(op: str, count: int, params_per_feature: int, optional=()) -> OpBuilder:
    def build(name: str, fields: dict[str, Any], widths: list[int]) -> list[Layer]:
        _take(name, op, fields, (), optional)
        _inputs(name, op, widths, count)
        width = _same(name, op, widths)
        return [Layer(name, op, (), width, params_per_feature * width)]

    return build


def _embedding(name: str, fields: dict[str, Any], widths: list[int]) -> list[Layer]:
    _take(name, "embedding", fields, ("vocab", "dim"))
    _inputs(name, "embedding", widths, 0)
    return [Layer(name, "embedding", (), fields["dim"], fields["vocab"] * fields["dim"])]


def _position(name: str, fields: dict[str, Any], widths: list[int]) -> list[Layer]:
    _take(name, "position_embedding", fields, ("context",), ("dim",))
    _inputs(name, "position_embedding", widths, 1)
    dim = fields.get("dim", widths[0])
    if dim != widths[0]:
        raise ConfigError(f"layer {name!r} (position_embedding): dim={dim}, input {widths[0]}")
    return [Layer(name, "position_embedding", (), dim, fields["context"] * dim)]


def _loss(name: str, fields: dict[str, Any], widths: list[int]) -> list[Layer]:
    _take(name, "loss", fields)
    _inputs(name, "loss", widths, 1)
    return [Layer(name, "loss", (), 1)]


OPS: dict[str, OpBuilder] = {
    "embedding": _embedding,
    "position_embedding": _position,
    "linear": _linear,
    "relu": _simple("relu", 1, 0),
    "gelu": _simple("gelu", 1, 0),
    "swiglu": _simple("swiglu", 2, 0),
    "add": _simple("add", 2, 0),
    "layernorm": _simple("layernorm", 1, 2),
    "rmsnorm": _simple("rmsnorm", 1, 1),
    "attention": _attention,
    "loss": _loss,
}


def build_op(op: str, name: str, fields: dict[str, Any], widths: list[int]) -> list[Layer]:
    """The layers of one op; an unknown op is an error listing the valid ones."""
    if op not in OPS:
        raise ConfigError(
            f"layer {excerpt(name)}: op={excerpt(op)} is not one of: {', '.join(OPS)}"
        )
    return OPS[op](name, fields, widths)
