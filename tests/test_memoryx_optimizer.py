"""MemoryX optimizers against a plain numpy reference written from the papers' update rules."""

import numpy as np
import pytest
from wafersim.memoryx.optimizer import OPTIMIZERS, SGD, AdamW, make_optimizer, state_bytes
from wafersim.memoryx.store import WeightStore
from wafersim.wafer.errors import ConfigError

SHAPES = {"w": (6, 5), "b": (5,)}
STEPS = 6


def _grads(seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        {n: rng.standard_normal(s).astype(np.float32) for n, s in SHAPES.items()}
        for _ in range(STEPS)
    ]


def _ref_sgd(w, grads, lr, momentum, weight_decay):
    """Textbook SGD with momentum, float64."""
    w = w.astype(np.float64)
    v = np.zeros_like(w)
    for g in grads:
        g = g + weight_decay * w
        v = momentum * v + g
        w = w - lr * v
    return w


def _ref_adamw(w, grads, lr, beta1, beta2, eps, weight_decay):
    """Textbook AdamW (decoupled decay, bias correction, eps outside the sqrt), float64."""
    w = w.astype(np.float64)
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        w = w - lr * weight_decay * w
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        m_hat = m / (1 - beta1**t)
        v_hat = v / (1 - beta2**t)
        w = w - lr * m_hat / (np.sqrt(v_hat) + eps)
    return w


CASES = [
    (SGD(lr=0.1), _ref_sgd, {"momentum": 0.0, "weight_decay": 0.0}),
    (
        SGD(lr=0.05, momentum=0.9, weight_decay=1e-2),
        _ref_sgd,
        {"momentum": 0.9, "weight_decay": 1e-2},
    ),
    (
        AdamW(lr=1e-2, beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.1),
        _ref_adamw,
        {"beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.1},
    ),
    (AdamW(), _ref_adamw, {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 1e-2}),
]


def _run(optimizer, grads) -> WeightStore:
    store = WeightStore.materialised(SHAPES, seed=3)
    for step, per_tensor in enumerate(grads, start=1):
        for name, g in per_tensor.items():
            optimizer.apply(store, name, g, step)
    return store


@pytest.mark.parametrize(("optimizer", "reference", "params"), CASES)
def test_matches_numpy_reference(optimizer, reference, params):
    """Several per-tensor steps match the float64 numpy reference to float32 precision."""
    grads = _grads(11)
    store = _run(optimizer, grads)
    start = WeightStore.materialised(SHAPES, seed=3)
    for name in SHAPES:
        expected = reference(start.get(name), [g[name] for g in grads], optimizer.lr, **params)
        assert store.get(name).dtype == np.float32
        np.testing.assert_allclose(store.get(name), expected, rtol=1e-5, atol=1e-6)


def test_state_lives_in_store():
    """Momentum and Adam moments are store slots; momentum-free SGD keeps none."""
    store = WeightStore.materialised(SHAPES, seed=0)
    g = np.ones((5,), np.float32)
    SGD(lr=0.1).apply(store, "b", g, 1)
    assert store.state() == {}
    SGD(lr=0.1, momentum=0.5).apply(store, "b", g, 1)
    assert np.array_equal(store.slot("b", "momentum"), g)
    AdamW().apply(store, "w", np.ones((6, 5), np.float32), 1)
    assert set(store.state()) == {"momentum", "exp_avg", "exp_avg_sq"}


def test_state_bytes_for_timing_only_store():
    """Optimizer state bytes are slots x elements x 4 even for a timing-only bf16 store."""
    store = WeightStore.timing_only({"w": (1000, 1000)}, dtype="bf16")
    assert state_bytes(AdamW(), store) == 2 * 10**6 * 4
    assert state_bytes(SGD(lr=1.0, momentum=0.9), store) == 10**6 * 4
    assert state_bytes(SGD(lr=1.0), store) == 0
    with pytest.raises(ConfigError, match="timing-only"):
        AdamW().apply(store, "w", np.zeros((1000, 1000), np.float32), 1)


@pytest.mark.parametrize(
    ("name", "params", "match"),
    [
        ("lamb", {}, r"allowed: \['adamw', 'sgd'\]"),
        ("sgd", {"lr": 0.1, "nesterov": True}, r"unknown sgd parameter\(s\) \['nesterov'\]"),
        ("sgd", {"lr": 0.0}, r"lr is 0.0; allowed: a finite number in \(0.0, inf\]"),
        ("sgd", {"lr": 0.1, "momentum": 1.0}, r"momentum is 1.0; allowed: .*\[0.0, 1.0\)"),
        ("adamw", {"beta2": -0.1}, r"beta2 is -0.1"),
        ("adamw", {"eps": 0}, r"eps is 0"),
        ("adamw", {"weight_decay": float("nan")}, r"weight_decay is nan"),
        ("adamw", {"lr": True}, r"lr is True"),
    ],
)
def test_bad_hyper_parameters(name, params, match):
    """Unknown optimizers, unknown keys and out-of-range values raise ConfigError with ranges."""
    with pytest.raises(ConfigError, match=match):
        make_optimizer(name, **params)


def test_bad_step_and_gradient():
    """A step < 1 or a gradient of the wrong shape raises ConfigError."""
    store = WeightStore.materialised(SHAPES, seed=0)
    with pytest.raises(ConfigError, match="step is 0"):
        AdamW().apply(store, "b", np.zeros(5, np.float32), 0)
    with pytest.raises(ConfigError, match=r"allowed: \(5,\) float"):
        AdamW().apply(store, "b", np.zeros(4, np.float32), 1)


def test_registry_round_trip():
    """Every registered optimizer rebuilds from its to_dict()."""
    for name, cls in OPTIMIZERS.items():
        opt = make_optimizer(name, lr=0.5)
        assert isinstance(opt, cls)
        params = opt.to_dict()
        assert make_optimizer(params.pop("name"), **params) == opt
