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
    one bit of one) is refused, naming it (resumed, it would give exit 0 and silently
    different weights, or nan loss)."""
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


def _saved_with_everything(path):
    """A checkpoint holding every attribute the code writes: optimizer state, rng and meta."""
    store = WeightStore.materialised(SHAPES, seed=5, init_std=0.1)
    AdamW().apply(store, "w", np.ones((8, 3), np.float32), 1)
    meta = {"config_sha256": "ab" * 32, "losses": [2.302585, 1.5], "accuracy": [[6, 0.5]]}
    save_checkpoint(path, store, 6, AdamW(), np.random.default_rng(3), meta=meta)


def _one_value_changed(value):
    """``value`` with one thing changed and its type kept: a number moved by one, or the
    last digit of a text (one digit of a JSON loss history) changed, or a letter added."""
    if isinstance(value, str):
        digits = [i for i, c in enumerate(value) if c.isdigit()]
        if not digits:
            return value + "x"
        i = digits[-1]
        return value[:i] + str((int(value[i]) + 1) % 10) + value[i + 1 :]
    return value + 1


def test_every_attribute_is_covered_by_a_checksum(tmp_path):
    """One value of any attribute changed (step, seed, init_std, optimizer, rng state, meta,
    the checksums themselves) makes the checkpoint refused as damaged, naming what changed."""
    path = tmp_path / "c.h5"
    _saved_with_everything(path)
    with h5py.File(path, "r") as f:
        keys = list(f.attrs)
    assert {"step", "seed", "init_std", "meta", "rng_state", "optimizer", "checksums"} <= set(keys)
    for key in keys:
        _saved_with_everything(path)
        with h5py.File(path, "r+") as f:
            f.attrs[key] = _one_value_changed(f.attrs[key])
        with pytest.raises(ConfigError) as info:
            load_checkpoint(path)
        message = str(info.value)
        assert str(path) in message
        assert "\n" not in message
        if key == "format_version":
            assert "format_version is 4" in message
        elif key != "format":
            assert "fails its checksum" in message, (key, message)
            assert key == "checksums" or f"attribute {key} of /" in message


def test_a_changed_loss_history_or_step_is_refused(tmp_path):
    """A digit of the stored loss history, or ``step`` moved from 6 to 7, is refused: such a
    checkpoint would resume and train a different number of steps than the run claims."""
    path = tmp_path / "c.h5"
    for key, change in (
        ("meta", lambda meta: meta.replace("2.302585", "2.302586")),
        ("step", lambda step: step + 1),
    ):
        _saved_with_everything(path)
        with h5py.File(path, "r+") as f:
            f.attrs[key] = change(f.attrs[key])
        with pytest.raises(ConfigError, match=f"attribute {key} of / fails its checksum"):
            load_checkpoint(path)


def test_a_changed_type_or_added_or_removed_item_is_refused(tmp_path):
    """An attribute of the same value but another type, a removed optimizer-state dataset,
    or an added group is refused: each changes what a resume would read."""
    path = tmp_path / "c.h5"
    cases = [
        (lambda f: f.attrs.__setitem__("step", np.float64(6)), "attribute step of /"),
        (lambda f: f.__delitem__("state/exp_avg/w"), "/state/exp_avg/w is missing"),
        (lambda f: f["state"].create_group("momentum"), "group /state/momentum was not saved"),
    ]
    for change, message in cases:
        _saved_with_everything(path)
        with h5py.File(path, "r+") as f:
            change(f)
        with pytest.raises(ConfigError, match=message):
            load_checkpoint(path)


@pytest.mark.parametrize("version", [1, 2, 4, "3"])
def test_an_older_or_unknown_format_version_is_refused(tmp_path, version):
    """A format version other than the current one is refused in one line naming the file,
    the version found and the one read: older versions leave metadata unchecked."""
    path = tmp_path / "c.h5"
    _saved_with_everything(path)
    with h5py.File(path, "r+") as f:
        f.attrs["format_version"] = version
    with pytest.raises(ConfigError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert str(path) in message
    assert "\n" not in message
    assert f"format_version is {version!r}; this wafersim reads only 3" in message


def test_resume_skips_a_checkpoint_whose_step_was_changed(tmp_path, caplog):
    """A newest checkpoint whose ``step`` changed is skipped as damaged for the one before."""
    from wafersim.memoryx.training import Checkpoints, resume

    saved = Checkpoints(tmp_path, every=1, keep=2, digest="d" * 64, training={})
    store = WeightStore.materialised(SHAPES, seed=5)
    folder = tmp_path / "checkpoints"
    for step in (5, 6):
        meta = {"config_sha256": saved.digest, "config": {}, "losses": [1.0] * step}
        save_checkpoint(folder / f"step_{step:08d}.h5", store, step, SGD(lr=0.1), meta=meta)
    with h5py.File(folder / "step_00000006.h5", "r+") as f:
        f.attrs["step"] = 7
    _, start, history = resume(saved, store, 12)
    assert (start, len(history.losses)) == (5, 5)
    assert "skipped damaged checkpoint(s)" in caplog.text
