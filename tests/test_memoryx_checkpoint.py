"""MemoryX checkpoints: round trip, bit-identical resume after a kill, crash-safe writes."""

from pathlib import Path

import h5py
import numpy as np
import pytest
import wafersim.memoryx.checkpoint as checkpoint_module
from wafersim.memoryx.checkpoint import load_checkpoint, restore_rng, save_checkpoint
from wafersim.memoryx.optimizer import SGD, AdamW
from wafersim.memoryx.store import WeightStore
from wafersim.wafer.errors import ConfigError

from wafersim import wafer

SHAPES = {"w": (8, 3), "b": (3,)}
TOTAL_STEPS = 20
EVERY = 5
BATCH = 16


def _linear_regression_grads(store, rng):
    """Mean-squared-error gradients of y = x @ w + b on a fresh batch from ``rng``."""
    x = rng.standard_normal((BATCH, 8)).astype(np.float32)
    y = (x @ np.linspace(-1, 1, 24, dtype=np.float32).reshape(8, 3)).astype(np.float32)
    err = x @ store.get("w") + store.get("b") - y
    return {"w": (2.0 / BATCH) * (x.T @ err), "b": (2.0 / BATCH) * err.sum(axis=0)}


def _train(store, optimizer, rng, first, last, ckpt=None):
    """Steps first..last; a checkpoint after every EVERY-th step when ``ckpt`` is given."""
    for step in range(first, last + 1):
        for name, grad in _linear_regression_grads(store, rng).items():
            optimizer.apply(store, name, grad, step)
        if ckpt is not None and step % EVERY == 0:
            save_checkpoint(ckpt, store, step, optimizer, rng)


def _bits(array):
    return np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize(
    "optimizer", [SGD(lr=0.05, momentum=0.9, weight_decay=1e-3), AdamW(lr=1e-2)]
)
@pytest.mark.parametrize("kill_seed", [1, 4, 6])  # kills after steps 12, 15, 11
def test_resume_after_kill_is_bit_identical(tmp_path, optimizer, kill_seed):
    """Killed at a random step and resumed from the last checkpoint, training ends bit-identical."""
    reference = WeightStore.materialised(SHAPES, seed=42)
    _train(reference, optimizer, np.random.default_rng(9), 1, TOTAL_STEPS)

    kill_step = int(np.random.default_rng(kill_seed).integers(EVERY, TOTAL_STEPS))
    ckpt = tmp_path / "run.h5"
    _train(
        WeightStore.materialised(SHAPES, seed=42),
        optimizer,
        np.random.default_rng(9),
        1,
        kill_step,
        ckpt,
    )  # the process dies after kill_step

    resumed = load_checkpoint(ckpt)
    assert resumed.step == kill_step // EVERY * EVERY
    assert resumed.optimizer == optimizer
    _train(
        resumed.store,
        resumed.optimizer,
        restore_rng(resumed.rng_state),
        resumed.step + 1,
        TOTAL_STEPS,
    )
    for name in SHAPES:
        assert np.array_equal(_bits(resumed.store.get(name)), _bits(reference.get(name)))
    for slot, arrays in reference.state().items():
        for name, array in arrays.items():
            assert np.array_equal(_bits(resumed.store.slot(name, slot)), _bits(array))


def test_round_trip_keeps_everything(tmp_path):
    """Weights, state, step, seed, init_std, optimizer and version survive a save and load."""
    store = WeightStore.materialised(SHAPES, seed=5, init_std=0.1)
    AdamW().apply(store, "w", np.ones((8, 3), np.float32), 1)
    save_checkpoint(tmp_path / "c.h5", store, 1, AdamW())
    back = load_checkpoint(tmp_path / "c.h5")
    assert (back.step, back.store.seed, back.store.init_std) == (1, 5, 0.1)
    assert back.optimizer == AdamW()
    assert back.rng_state is None
    assert back.wafersim_version == wafer.__version__
    assert np.array_equal(back.store.get("w"), store.get("w"))
    assert np.array_equal(back.store.slot("w", "exp_avg_sq"), store.slot("w", "exp_avg_sq"))
    assert set(back.store.state()) == {"exp_avg", "exp_avg_sq"}


def test_crash_while_writing_keeps_previous_checkpoint(tmp_path, monkeypatch):
    """An exception midway through a save leaves the earlier checkpoint loadable and no temp."""
    store = WeightStore.materialised(SHAPES, seed=1)
    opt = SGD(lr=0.1, momentum=0.9)
    opt.apply(store, "b", np.ones(3, np.float32), 1)
    path = tmp_path / "c.h5"
    save_checkpoint(path, store, 1, opt)
    before = store.get("b").copy()

    def dies_midway(group, state):
        group.create_group("momentum")
        raise RuntimeError("killed while writing")

    opt.apply(store, "b", np.ones(3, np.float32), 2)
    monkeypatch.setattr(checkpoint_module, "_write_state", dies_midway)
    with pytest.raises(RuntimeError, match="killed"):
        save_checkpoint(path, store, 2, opt)
    back = load_checkpoint(path)
    assert back.step == 1
    assert np.array_equal(back.store.get("b"), before)
    assert [p.name for p in tmp_path.iterdir()] == ["c.h5"]


def test_not_a_checkpoint_is_one_line_config_error(tmp_path):
    """Missing, non-HDF5 and foreign HDF5 files raise a one-line ConfigError."""
    text = tmp_path / "notes.h5"
    text.write_text("hello")
    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as f:
        f.create_dataset("x", data=np.zeros(3))
    for path in (tmp_path / "missing.h5", text, foreign):
        with pytest.raises(ConfigError, match="not") as info:
            load_checkpoint(path)
        assert "\n" not in str(info.value)
        assert str(path) in str(info.value)


def test_timing_only_store_cannot_be_checkpointed(tmp_path):
    """Saving a timing-only store raises ConfigError and writes nothing."""
    with pytest.raises(ConfigError, match="timing-only"):
        save_checkpoint(tmp_path / "c.h5", WeightStore.timing_only(SHAPES), 0)
    assert not list(Path(tmp_path).iterdir())


def test_changed_bytes_fail_the_checksum_naming_the_dataset(tmp_path):
    """A weight or optimizer-state dataset whose bytes changed after saving (one value, or
    one bit of one) is refused, naming it (issue 27: such a checkpoint resumed with exit 0
    and silently different weights, or nan loss)."""
    store = WeightStore.materialised(SHAPES, seed=5, init_std=0.1)
    AdamW().apply(store, "w", np.ones((8, 3), np.float32), 1)
    path = tmp_path / "c.h5"
    for dataset in ("weights/w", "state/exp_avg/w"):
        save_checkpoint(path, store, 1, AdamW())
        with h5py.File(path, "r+") as f:
            bits = f[dataset][()].view(np.uint32)
            bits.flat[3] ^= 1 << 7  # one bit of one value
            f[dataset][...] = bits.view(np.float32)
        with pytest.raises(ConfigError, match=f"/{dataset} fails its checksum"):
            load_checkpoint(path)
