"""Optimizers MemoryX applies per tensor as its gradient streams off the wafer.

Both follow PyTorch's ``torch.optim`` semantics, in float32, with their state held in the
:class:`~memoryx.store.WeightStore` as named slots:

* ``SGD`` (slot ``momentum``): ``g += weight_decay * w``; ``v = momentum * v + g``
  (dampening 0, no Nesterov); ``w -= lr * v``. With ``momentum == 0`` no state is kept.
* ``AdamW`` (slots ``exp_avg``, ``exp_avg_sq``; Loshchilov & Hutter 2019, "Decoupled Weight
  Decay Regularization"): ``w -= lr * weight_decay * w``; ``m = b1 m + (1 - b1) g``;
  ``v = b2 v + (1 - b2) g^2``; ``w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)``
  with ``eps`` outside the square root and ``t`` the 1-based step.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
from wafersim.memoryx.store import NP_DTYPE, WeightStore
from wafersim.wafer.errors import ConfigError, excerpt

STATE_BYTES_PER_ELEMENT = 4  # optimizer state is float32 whatever the weights' dtype


class Optimizer(Protocol):
    name: ClassVar[str]
    slots: ClassVar[tuple[str, ...]]

    def apply(self, store: WeightStore, name: str, grad: np.ndarray, step: int) -> None: ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class SGD:
    """Stochastic gradient descent with optional momentum and L2 weight decay (PyTorch)."""

    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0
    name: ClassVar[str] = "sgd"

    def __post_init__(self) -> None:
        _check_range("lr", self.lr, 0.0, math.inf, low_open=True)
        _check_range("momentum", self.momentum, 0.0, 1.0, high_open=True)
        _check_range("weight_decay", self.weight_decay, 0.0, math.inf)

    @property
    def slots(self) -> tuple[str, ...]:
        return ("momentum",) if self.momentum > 0 else ()

    def apply(self, store: WeightStore, name: str, grad: np.ndarray, step: int) -> None:
        """Update tensor ``name`` in ``store`` with its gradient at 1-based ``step``."""
        w, g = _start(store, name, grad, step)
        if self.weight_decay:
            g = g + self.weight_decay * w
        if self.momentum:
            g = self.momentum * store.slot(name, "momentum") + g
            store.put_slot(name, "momentum", g)
        store.put(name, w - self.lr * g)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **asdict(self)}


@dataclass(frozen=True)
class AdamW:
    """Adam with decoupled weight decay (Loshchilov & Hutter; PyTorch ``AdamW``)."""

    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 1e-2
    name: ClassVar[str] = "adamw"
    slots: ClassVar[tuple[str, ...]] = ("exp_avg", "exp_avg_sq")

    def __post_init__(self) -> None:
        _check_range("lr", self.lr, 0.0, math.inf, low_open=True)
        _check_range("beta1", self.beta1, 0.0, 1.0, high_open=True)
        _check_range("beta2", self.beta2, 0.0, 1.0, high_open=True)
        _check_range("eps", self.eps, 0.0, math.inf, low_open=True)
        _check_range("weight_decay", self.weight_decay, 0.0, math.inf)

    def apply(self, store: WeightStore, name: str, grad: np.ndarray, step: int) -> None:
        """Update tensor ``name`` in ``store`` with its gradient at 1-based ``step``."""
        w, g = _start(store, name, grad, step)
        w = w * NP_DTYPE(1.0 - self.lr * self.weight_decay)
        m = self.beta1 * store.slot(name, "exp_avg") + (1.0 - self.beta1) * g
        v = self.beta2 * store.slot(name, "exp_avg_sq") + (1.0 - self.beta2) * (g * g)
        m_hat = m / NP_DTYPE(1.0 - self.beta1**step)
        v_hat = v / NP_DTYPE(1.0 - self.beta2**step)
        store.put_slot(name, "exp_avg", m)
        store.put_slot(name, "exp_avg_sq", v)
        store.put(name, w - self.lr * m_hat / (np.sqrt(v_hat) + self.eps))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **asdict(self)}


OPTIMIZERS: dict[str, type] = {SGD.name: SGD, AdamW.name: AdamW}


def make_optimizer(name: str, **params: Any) -> Optimizer:
    """The optimizer registered as ``name`` built from ``params`` (validated)."""
    if not isinstance(name, str) or name not in OPTIMIZERS:
        raise ConfigError(f"optimizer is {excerpt(name)}; allowed: {sorted(OPTIMIZERS)}")
    cls = OPTIMIZERS[name]
    allowed = sorted(f for f in cls.__dataclass_fields__ if f != "name")
    unknown = sorted(set(params) - set(allowed), key=str)
    if unknown:
        raise ConfigError(f"unknown {name} parameter(s) {excerpt(unknown)}; allowed: {allowed}")
    return cls(**params)


def optimizer_from_dict(data: dict[str, Any]) -> Optimizer:
    """Inverse of ``to_dict``."""
    params = dict(data)
    return make_optimizer(params.pop("name", None), **params)


def state_bytes(optimizer: Optimizer, store: WeightStore) -> int:
    """Bytes of optimizer state MemoryX holds for every tensor of ``store`` (float32 slots)."""
    elements = sum(store.numel(name) for name in store.names)
    return len(optimizer.slots) * elements * STATE_BYTES_PER_ELEMENT


def _start(store: WeightStore, name: str, grad: np.ndarray, step: int) -> tuple[np.ndarray, ...]:
    """The tensor's float32 values and the validated float32 gradient."""
    if not isinstance(step, int | np.integer) or isinstance(step, bool) or step < 1:
        raise ConfigError(f"step is {step!r}; allowed: an integer >= 1")
    w = store.get(name)
    g = np.asarray(grad)
    if g.shape != w.shape or not np.issubdtype(g.dtype, np.floating):
        raise ConfigError(
            f"gradient for {name!r} has shape {g.shape} dtype {g.dtype}; allowed: {w.shape} float"
        )
    return w, g.astype(NP_DTYPE, copy=False)


def _check_range(
    field: str,
    value: object,
    low: float,
    high: float,
    low_open: bool = False,
    high_open: bool = False,
) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and _finite(value)
    if ok:
        ok = (value > low if low_open else value >= low) and (
            value < high if high_open else value <= high
        )
    if not ok:
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ConfigError(f"{field} is {excerpt(value)}; allowed: a finite number in {interval}")


def _finite(value: float) -> bool:
    """Whether ``value`` is a finite float: an integer too large for one is not."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
