"""PyTorch modules -> :class:`~compiler.graph.LayerGraph`, traced with ``torch.fx``.

Optional: ``pip install 'wafersim[torch]'``; nothing else in wafersim imports torch.

The traced graph becomes the entries of a model file (``op``, ``name``, ``from``, fields) and
goes through the same builder (:func:`compiler.model_file.build_graph`), so it is checked
the same way. Supported nodes (:func:`module_ops`, :func:`function_ops`, :data:`METHOD_OPS`):
``nn.Linear`` (its ``bias`` becomes a ``bias`` layer, as
``bias: true`` in a model file), the activations ``nn.ReLU`` and ``nn.GELU`` (also
``F.relu``, ``torch.relu``, ``Tensor.relu``, ``F.gelu``), ``nn.Identity``, and the sum of two
tensors (``x + y``, ``torch.add``: the ``add`` op), inside any ``nn.Sequential`` or module
that ``torch.fx`` traces. Anything else is a ConfigError naming the node. A layer is named
after its module's path in ``module`` (``fc1``, ``encoder.0``), a function after its node.

Like a model file for training, the graph ends in a softmax cross-entropy ``loss`` layer
(``loss=False`` leaves it out).
"""

from __future__ import annotations

import operator
from typing import Any, NoReturn

from wafersim.compiler.graph import LayerGraph
from wafersim.compiler.model_file import ModelFile, build_graph, graph_model
from wafersim.wafer.errors import ConfigError

METHOD_OPS = {"relu": "relu", "add": "add"}
LOSS_LAYER = "loss"
SUPPORTED = "nn.Linear, nn.ReLU, nn.GELU, nn.Identity, relu, gelu and the sum of two tensors"


def _torch():
    try:
        import torch
        import torch.fx
    except ImportError:
        raise ConfigError("PyTorch is not installed: pip install 'wafersim[torch]'") from None
    return torch


def module_ops(torch) -> dict[type, str | None]:
    """Module classes (exactly these) that trace to an op (None: passes its input on)."""
    nn = torch.nn
    return {nn.Linear: "linear", nn.ReLU: "relu", nn.GELU: "gelu", nn.Identity: None}


def function_ops(torch) -> dict[Any, str]:
    """Functions that trace to an op of the layer graph."""
    functional = torch.nn.functional
    return {
        functional.relu: "relu",
        torch.relu: "relu",
        functional.gelu: "gelu",
        operator.add: "add",
        torch.add: "add",
    }


def graph_from_torch(module, input_features: int, name: str, *, loss: bool = True) -> LayerGraph:
    """The layer graph of ``module`` for inputs of ``input_features`` features per token."""
    torch = _torch()
    if not isinstance(module, torch.nn.Module):
        raise ConfigError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if isinstance(input_features, bool) or not isinstance(input_features, int):
        raise ConfigError(f"input_features={input_features!r} must be an integer >= 1")
    try:
        traced = torch.fx.symbolic_trace(module)
    except Exception as error:  # fx raises many kinds (TraceError, TypeError, ...)
        raise ConfigError(f"torch.fx cannot trace {name!r}: {error}") from None
    entries = _Entries(traced, torch).build()
    if loss:
        entries.append({"op": "loss", "name": LOSS_LAYER})
    return build_graph(name, entries, input_features)


def model_from_torch(module, input_features: int, name: str, *, loss: bool = True) -> ModelFile:
    """:func:`graph_from_torch` as a :class:`ModelFile` for :func:`compiler.plan.compile_plan`."""
    graph = graph_from_torch(module, input_features, name, loss=loss)
    return graph_model(graph, f"torch.fx trace of {type(module).__name__}")


class _Entries:
    """Walks a traced graph once, turning its nodes into model-file entries."""

    def __init__(self, traced, torch) -> None:
        self.traced, self.node_type = traced, torch.fx.Node
        self.modules, self.functions = module_ops(torch), function_ops(torch)
        self.names: dict[Any, str] = {}  # node -> the op (or "input") that holds its value
        self.entries: list[dict[str, Any]] = []
        self.output: str | None = None

    def build(self) -> list[dict[str, Any]]:
        for node in self.traced.graph.nodes:
            getattr(self, f"_{node.op}", self._unsupported)(node)
        if not self.entries or self.entries[-1]["name"] != self.output:
            raise ConfigError(
                f"the module must return the value of its last op, not {self.output!r}"
            )
        return self.entries

    def _placeholder(self, node) -> None:
        if self.names:
            raise ConfigError(f"node {node.name!r}: the module must take one input tensor")
        self.names[node] = "input"

    def _call_module(self, node) -> None:
        module = self.traced.get_submodule(node.target)
        if type(module) not in self.modules:
            self._unsupported(node, f"module {node.target!r}: {type(module).__name__}")
        op = self.modules[type(module)]
        if op is None:  # nn.Identity
            self.names[node] = self._sources(node, 1)[0]
            return
        fields = {}
        if op == "linear":
            fields = {"in": module.in_features, "out": module.out_features,
                      "bias": module.bias is not None}  # fmt: skip
        self._add(node, op, str(node.target), fields)

    def _call_function(self, node) -> None:
        op = self.functions.get(node.target)
        if op is None or (op == "add" and node.kwargs):  # torch.add(x, y, alpha=...)
            self._unsupported(node, f"function {getattr(node.target, '__name__', node.target)}")
        self._add(node, op, node.name, {})

    def _call_method(self, node) -> None:
        if node.target not in METHOD_OPS or node.kwargs:
            self._unsupported(node, f"method Tensor.{node.target}")
        self._add(node, METHOD_OPS[node.target], node.name, {})

    def _output(self, node) -> None:
        self.output = self._sources(node, 1)[0]

    def _unsupported(self, node, what: str | None = None) -> NoReturn:
        what = what or f"{node.op} {node.target}"
        raise ConfigError(f"node {node.name!r} ({what}) is not supported; supported: {SUPPORTED}")

    def _add(self, node, op: str, name: str, fields: dict[str, Any]) -> None:
        if any(entry["name"] == name for entry in self.entries):
            raise ConfigError(f"node {node.name!r}: module {name!r} is called twice")
        count = 2 if op == "add" else 1
        self.entries.append({"op": op, "name": name, "from": self._sources(node, count), **fields})
        self.names[node] = name

    def _sources(self, node, count: int) -> list[str]:
        """The ops that feed ``node``: exactly ``count`` arguments, each a traced tensor."""
        values = [self.names.get(a) if isinstance(a, self.node_type) else None for a in node.args]
        if len(values) != count or None in values:
            raise ConfigError(
                f"node {node.name!r} ({node.op} {getattr(node.target, '__name__', node.target)}) "
                f"must take {count} traced tensor(s) and nothing else, got {node.args}"
            )
        return values
