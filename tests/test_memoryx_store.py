"""MemoryX weight store: seeded initialisation, byte counts, timing-only mode, validation."""

import numpy as np
import pytest
from wafersim.memoryx.store import WeightStore
from wafersim.wafer.errors import ConfigError

SHAPES = {"embed": (16, 8), "fc.weight": (8, 4), "fc.bias": (4,)}


def test_same_seed_same_values_independent_of_dict_order():
    """One seed gives the same float32 tensors whatever the order of the shapes dict."""
    a = WeightStore.materialised(SHAPES, seed=7)
    b = WeightStore.materialised(dict(reversed(SHAPES.items())), seed=7)
    for name in SHAPES:
        assert a.get(name).dtype == np.float32
        assert np.array_equal(a.get(name), b.get(name))


def test_different_seeds_and_tensors_differ():
    """Different seeds, and different tensors of one seed, draw different values."""
    a = WeightStore.materialised({"x": (64,), "y": (64,)}, seed=1)
    b = WeightStore.materialised({"x": (64,), "y": (64,)}, seed=2)
    assert not np.array_equal(a.get("x"), b.get("x"))
    assert not np.array_equal(a.get("x"), a.get("y"))


def test_init_is_normal_with_gpt2_std():
    """Values follow N(0, 0.02^2) by default and N(0, init_std^2) when given."""
    w = WeightStore.materialised({"w": (256, 256)}, seed=0).get("w")
    assert abs(float(w.mean())) < 1e-3
    assert float(w.std()) == pytest.approx(0.02, rel=0.02)
    w1 = WeightStore.materialised({"w": (256, 256)}, seed=0, init_std=1.0).get("w")
    assert float(w1.std()) == pytest.approx(1.0, rel=0.02)


def test_bytes_per_dtype():
    """Byte counts are elements times 4 (fp32) or 2 (fp16, bf16)."""
    fp32 = WeightStore.materialised(SHAPES, seed=0)
    assert fp32.bytes("embed") == 16 * 8 * 4
    assert fp32.total_bytes() == (128 + 32 + 4) * 4
    bf16 = WeightStore.timing_only({"w": (10**6, 10**6)}, dtype="bf16")
    assert bf16.total_bytes() == 2 * 10**12


def test_timing_only_refuses_values():
    """A timing-only store has byte counts but reading or writing values is a ConfigError."""
    store = WeightStore.timing_only(SHAPES, dtype="fp16")
    assert not store.is_materialised
    with pytest.raises(ConfigError, match="timing-only"):
        store.get("embed")
    with pytest.raises(ConfigError, match="timing-only"):
        store.put("fc.bias", np.zeros(4, np.float32))
    with pytest.raises(ConfigError, match="timing-only"):
        store.slot("fc.bias", "momentum")


def test_get_is_read_only_and_put_checks_shape():
    """get() returns a read-only view; put() rejects a wrong shape naming the allowed one."""
    store = WeightStore.materialised(SHAPES, seed=0)
    with pytest.raises(ValueError, match="read-only"):
        store.get("fc.bias")[0] = 1.0
    with pytest.raises(ConfigError, match=r"allowed: \(4,\)"):
        store.put("fc.bias", np.zeros(5, np.float32))
    store.put("fc.bias", np.ones(4))
    assert store.get("fc.bias").dtype == np.float32


def test_slots_default_to_zeros():
    """An optimizer slot never written reads as zeros of the tensor's shape."""
    store = WeightStore.materialised(SHAPES, seed=0)
    assert np.array_equal(store.slot("fc.weight", "momentum"), np.zeros((8, 4)))
    assert store.state() == {}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"shapes": {}, "seed": 0}, "non-empty dict"),
        ({"shapes": {"a": (0, 3)}, "seed": 0}, r"tuple of ints >= 1"),
        ({"shapes": {"a/b": (3,)}, "seed": 0}, "without '/'"),
        ({"shapes": {"a": (3,)}, "seed": -1}, "integer >= 0"),
        ({"shapes": {"a": (3,)}, "seed": 0, "dtype": "bf16"}, r"allowed: \['fp32'\]"),
        ({"shapes": {"a": (3,)}, "seed": 0, "init_std": -1.0}, "finite number >= 0"),
    ],
)
def test_bad_input_is_config_error(kwargs, match):
    """Bad shapes, names, seeds, dtypes and init_std raise ConfigError naming what is allowed."""
    with pytest.raises(ConfigError, match=match):
        WeightStore.materialised(**kwargs)


def test_unknown_tensor_lists_names():
    """Asking for a tensor the store lacks names the tensors it holds."""
    with pytest.raises(ConfigError, match="fc.bias"):
        WeightStore.timing_only(SHAPES).bytes("nope")
