"""Functional execution of a small layer graph: the real forward and backward numbers.

Every GEMM of a step (``forward``: ``Y = X W``; ``backward_data``: ``dX = dY W^T``;
``backward_weight``: ``dW = X^T dY``) goes through a ``matmul(layer, pass, a, b)`` callback:
the cycle engine in a run, numpy in the reference, so both compute the same sequence of float32
operations and their losses can be compared. Element-wise work (bias, ReLU, softmax
cross-entropy) is done in numpy on the host; its wafer cycles are the plan's estimates.

Supported graphs are chains of ``linear``, ``bias``, ``relu`` and a final ``loss`` (softmax
cross-entropy, mean over the batch): the multilayer perceptrons that fit a cycle-engine run.
Larger models run timing-only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from wafersim.compiler.graph import Layer, LayerGraph
from wafersim.wafer.errors import ConfigError

FUNCTIONAL_OPS = ("linear", "bias", "relu", "loss")
Matmul = Callable[[str, str, np.ndarray, np.ndarray], np.ndarray]


def check_functional(graph: LayerGraph) -> None:
    """ConfigError unless ``graph`` is a chain of the supported ops ending in ``loss``."""
    previous = "input"
    for layer in graph.layers:
        if layer.op not in FUNCTIONAL_OPS:
            raise ConfigError(
                f"layer {layer.name!r} is a {layer.op!r}: functional runs (tier: cycle) support "
                f"{', '.join(FUNCTIONAL_OPS)}; use tier: analytic for this model"
            )
        if layer.op != "loss" and layer.inputs not in ((previous,), ()):
            raise ConfigError(f"layer {layer.name!r}: functional runs need a chain of layers")
        previous = layer.name
    if not graph.layers or graph.layers[-1].op != "loss":
        raise ConfigError(f"model {graph.name!r} must end in a loss layer to train")


def weight_shapes(graph: LayerGraph) -> dict[str, tuple[int, ...]]:
    """The tensors MemoryX holds for ``graph``: ``(in, out)`` per linear, ``(out,)`` per bias."""
    return {
        layer.name: layer.weights if layer.weights is not None else (layer.params,)
        for layer in graph.layers
        if layer.params
    }


def forward(graph: LayerGraph, weights, x: np.ndarray, matmul: Matmul) -> list[np.ndarray]:
    """The activation entering each layer, and the logits last."""
    acts = [np.asarray(x, np.float32)]
    for layer in graph.layers[:-1]:
        acts.append(_forward_one(layer, weights, acts[-1], matmul))
    return acts


def _forward_one(layer: Layer, weights, a: np.ndarray, matmul: Matmul) -> np.ndarray:
    if layer.op == "linear":
        return matmul(layer.name, "forward", a, weights[layer.name])
    if layer.op == "bias":
        return a + weights[layer.name]
    return np.maximum(a, 0.0)  # relu


def loss_and_grads(graph: LayerGraph, weights, x, labels, matmul: Matmul):
    """Mean softmax cross-entropy of the batch and the gradient of every tensor."""
    acts = forward(graph, weights, x, matmul)
    loss, delta = softmax_cross_entropy(acts[-1], labels)
    grads = {}
    for index in reversed(range(len(graph.layers) - 1)):
        layer, a = graph.layers[index], acts[index]
        if layer.op == "linear":
            grads[layer.name] = matmul(layer.name, "backward_weight", a.T, delta)
            if index > 0:
                delta = matmul(layer.name, "backward_data", delta, weights[layer.name].T)
        elif layer.op == "bias":
            grads[layer.name] = delta.sum(axis=0)
        else:
            delta = np.where(a > 0, delta, np.float32(0.0))
    return loss, grads


def softmax_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean loss over the batch and its gradient with respect to ``logits`` (float32)."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    rows = np.arange(len(labels))
    loss = float(-log_probs[rows, labels].mean())
    delta = np.exp(log_probs)
    delta[rows, labels] -= 1.0
    return loss, (delta / len(labels)).astype(np.float32)


def numpy_matmul(_layer: str, _pass: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The reference GEMM."""
    return np.asarray(a, np.float32) @ np.asarray(b, np.float32)


def accuracy(graph: LayerGraph, weights, x: np.ndarray, labels: np.ndarray) -> float:
    """Share of samples whose largest logit is the label (host-side evaluation)."""
    logits = forward(graph, weights, x, numpy_matmul)[-1]
    return float((logits.argmax(axis=1) == labels).mean())
