"""Training data: digits, IDX/MNIST files, synthetic tokens, seeded batches, input pipeline."""

import gzip
import math
import subprocess
import sys

import numpy as np
import pytest
from wafersim.memoryx.data import (
    DEFAULT_WORKERS,
    Dataset,
    InputPipeline,
    batch_indices,
    input_bound,
    input_pipeline,
    load_dataset,
    read_idx,
    steps_per_epoch,
)
from wafersim.wafer.errors import ConfigError

MNIST_STEMS = {
    "train-images-idx3-ubyte": "images",
    "train-labels-idx1-ubyte": "labels",
    "t10k-images-idx3-ubyte": "images",
    "t10k-labels-idx1-ubyte": "labels",
}


def _idx_bytes(array: np.ndarray) -> bytes:
    """An unsigned-byte IDX file holding ``array`` (magic 0x0000080<ndim>, big-endian dims)."""
    header = (0x0800 + array.ndim).to_bytes(4, "big")
    dims = b"".join(d.to_bytes(4, "big") for d in array.shape)
    return header + dims + array.astype(np.uint8).tobytes()


def _tiny_mnist(folder, compress: bool) -> dict[str, np.ndarray]:
    """Writes a 5-train, 3-test MNIST of 28x28 images into ``folder``; returns the arrays."""
    rng = np.random.default_rng(0)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (5, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": np.array([0, 9, 3, 3, 7], dtype=np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (3, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": np.array([1, 2, 8], dtype=np.uint8),
    }
    for stem, array in arrays.items():
        data = _idx_bytes(array)
        if compress:
            (folder / f"{stem}.gz").write_bytes(gzip.compress(data))
        else:
            (folder / stem).write_bytes(data)
    return arrays


def _rows(x: np.ndarray, y: np.ndarray) -> set[bytes]:
    """Each (features, label) sample as bytes, for set comparisons."""
    return {row.tobytes() + bytes([label]) for row, label in zip(x, y, strict=True)}


# --- digits ----------------------------------------------------------------------------------


def test_digits_shapes_range_and_classes():
    """Digits load as float32 features in [0, 1] (64 per sample), int64 labels 0..9, 64 B each."""
    data = load_dataset({"name": "digits", "test_fraction": 0.2}, seed=0)
    assert isinstance(data, Dataset)
    assert data.name == "digits"
    assert data.classes == 10
    assert data.bytes_per_sample == 64
    assert len(data.x_train) + len(data.x_test) == 1797
    assert len(data.x_test) == pytest.approx(0.2 * 1797, abs=10)
    for x, y in ((data.x_train, data.y_train), (data.x_test, data.y_test)):
        assert x.dtype == np.float32
        assert x.shape == (len(y), 64)
        assert y.dtype == np.int64
        assert x.min() >= 0.0
        assert x.max() <= 1.0
        assert set(np.unique(y)) == set(range(10))
    assert data.x_train.max() == 1.0


def test_digits_split_is_stratified_and_disjoint():
    """Every class keeps about test_fraction of its samples in test; no sample is in both sets."""
    data = load_dataset({"name": "digits", "test_fraction": 0.5}, seed=3)
    train_counts = np.bincount(data.y_train, minlength=10)
    test_counts = np.bincount(data.y_test, minlength=10)
    assert np.all(np.abs(train_counts - test_counts) <= 1)
    shared = _rows(data.x_train, data.y_train) & _rows(data.x_test, data.y_test)
    assert len(shared) <= 1  # digits holds a few duplicate images; a leak would share hundreds


def test_digits_split_deterministic_per_seed():
    """One seed gives the same split; another seed gives a different one."""
    config = {"name": "digits"}
    a, b, c = (load_dataset(config, seed=s) for s in (7, 7, 8))
    assert np.array_equal(a.x_train, b.x_train)
    assert np.array_equal(a.y_test, b.y_test)
    assert not np.array_equal(a.y_train, c.y_train)


def test_dataset_arrays_are_read_only():
    """A loaded data set's arrays cannot be written."""
    data = load_dataset({"name": "synthetic_tokens", "vocab": 10, "seq": 4, "samples": 3}, 0)
    with pytest.raises(ValueError, match="read-only"):
        data.x_train[0, 0] = 1


@pytest.mark.slow
def test_digits_are_scikit_learns_and_load_without_it():
    """The shipped digits equal scikit-learn's ``load_digits`` value for value, and loading
    them imports no scikit-learn (the main job's install does not bring it)."""
    sklearn = pytest.importorskip("sklearn.datasets")
    bunch = sklearn.load_digits()
    data = load_dataset({"name": "digits", "test_fraction": 0.5}, seed=1)
    x = np.concatenate([data.x_train, data.x_test])
    y = np.concatenate([data.y_train, data.y_test])
    expected = (bunch.data / 16.0).astype(np.float32)
    assert _rows(x, y) == _rows(expected, bunch.target)
    assert len(x) == len(expected)
    probe = ("import sys; from memoryx.data import load_dataset; "
             "load_dataset({'name': 'digits'}, 0); print('sklearn' in sys.modules)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=120)  # fmt: skip
    assert done.stdout.strip() == "False"


# --- MNIST / IDX -----------------------------------------------------------------------------


@pytest.mark.parametrize("compress", [False, True])
def test_tiny_idx_mnist_loads_exactly(tmp_path, compress):
    """Plain and gzipped IDX files load to the written pixels / 255 and the written labels."""
    arrays = _tiny_mnist(tmp_path, compress)
    data = load_dataset({"name": "mnist", "path": str(tmp_path)}, seed=0)
    assert data.classes == 10
    assert data.bytes_per_sample == 784
    expected_x = arrays["train-images-idx3-ubyte"].reshape(5, 784).astype(np.float32) / 255
    assert data.x_train.dtype == np.float32
    assert np.array_equal(data.x_train, expected_x)
    assert data.y_train.tolist() == [0, 9, 3, 3, 7]
    assert data.y_train.dtype == np.int64
    assert data.x_test.shape == (3, 784)
    assert data.y_test.tolist() == [1, 2, 8]


def test_read_idx_round_trip(tmp_path):
    """read_idx returns exactly the uint8 array written, with its dimensions."""
    array = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    path = tmp_path / "a-idx3-ubyte"
    path.write_bytes(_idx_bytes(array))
    assert np.array_equal(read_idx(path), array)


@pytest.mark.parametrize(
    ("mangle", "problem"),
    [
        (lambda b: b"\x00\x00\x08\x0d" + b[4:], "bad magic"),
        (lambda b: b[:-1], "truncated"),
        (lambda b: b + b"\x00", "trailing"),
        (lambda b: b[:6], "truncated header"),
        (lambda b: b[:2], "too short"),
    ],
)
def test_malformed_idx_names_the_file(tmp_path, mangle, problem):
    """A malformed IDX file is a ConfigError naming the file and what is wrong with it."""
    _tiny_mnist(tmp_path, compress=False)
    path = tmp_path / "t10k-labels-idx1-ubyte"
    path.write_bytes(mangle(path.read_bytes()))
    with pytest.raises(ConfigError, match="t10k-labels-idx1-ubyte") as error:
        load_dataset({"name": "mnist", "path": str(tmp_path)}, seed=0)
    assert problem in str(error.value)


def test_corrupt_gzip_and_missing_file_name_the_file(tmp_path):
    """A broken .gz and a missing IDX file are ConfigErrors naming the file."""
    _tiny_mnist(tmp_path, compress=True)
    broken = tmp_path / "train-labels-idx1-ubyte.gz"
    broken.write_bytes(broken.read_bytes()[:-8])
    with pytest.raises(ConfigError, match="train-labels-idx1-ubyte.gz"):
        load_dataset({"name": "mnist", "path": str(tmp_path)}, seed=0)
    broken.unlink()
    with pytest.raises(ConfigError, match="train-labels-idx1-ubyte.*missing"):
        load_dataset({"name": "mnist", "path": str(tmp_path)}, seed=0)


def test_mnist_label_count_and_range_checked(tmp_path):
    """Labels must be one per image and in 0..9, else a ConfigError naming the labels file."""
    _tiny_mnist(tmp_path, compress=False)
    labels = tmp_path / "train-labels-idx1-ubyte"
    labels.write_bytes(_idx_bytes(np.array([0, 1, 2], dtype=np.uint8)))
    with pytest.raises(ConfigError, match="train-labels-idx1-ubyte.*3 labels for 5 images"):
        load_dataset({"name": "mnist", "path": str(tmp_path)}, seed=0)
    labels.write_bytes(_idx_bytes(np.array([0, 1, 2, 3, 10], dtype=np.uint8)))
    with pytest.raises(ConfigError, match="train-labels-idx1-ubyte.*label 10"):
        load_dataset({"name": "mnist", "path": str(tmp_path)}, seed=0)


def test_mnist_path_must_be_a_folder(tmp_path):
    """data.path is required and must be an existing folder."""
    with pytest.raises(ConfigError, match="path"):
        load_dataset({"name": "mnist"}, seed=0)
    with pytest.raises(ConfigError, match="data.path"):
        load_dataset({"name": "mnist", "path": str(tmp_path / "nope")}, seed=0)


# --- config validation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"name": "digits", "test_fracton": 0.2}, "test_fracton"),
        ({"name": "synthetic_tokens", "batch": 4}, "batch"),
        ({"name": "imagenet"}, "data.name"),
        ({"test_fraction": 0.2}, "data.name"),
        ({"name": "digits", "test_fraction": 0.0}, "data.test_fraction"),
        ({"name": "digits", "test_fraction": 0.95}, "data.test_fraction"),
        ({"name": "digits", "test_fraction": True}, "data.test_fraction"),
        ({"name": "synthetic_tokens", "vocab": 1}, "data.vocab"),
        ({"name": "synthetic_tokens", "vocab": 10**7 + 1}, "data.vocab"),
        ({"name": "synthetic_tokens", "seq": 0}, "data.seq"),
        ({"name": "synthetic_tokens", "seq": 10**6 + 1}, "data.seq"),
        ({"name": "synthetic_tokens", "samples": 0}, "data.samples"),
        ({"name": "synthetic_tokens", "samples": 65537}, "65536"),
        ({"name": "synthetic_tokens", "samples": 65536, "seq": 4096}, "materialised tokens"),
        ({"name": "synthetic_tokens", "samples": 2.0}, "data.samples"),
    ],
)
def test_bad_data_config_names_the_key(config, field):
    """Unknown keys and out-of-range or mistyped values are ConfigErrors naming the key."""
    with pytest.raises(ConfigError, match=field) as error:
        load_dataset(config, seed=0)
    assert "allowed" in str(error.value)


def test_unknown_key_lists_the_allowed_keys():
    """An unknown data key's error lists the keys that data set allows."""
    with pytest.raises(ConfigError, match="'name', 'test_fraction'"):
        load_dataset({"name": "digits", "size": 3}, seed=0)


def test_bad_seed_rejected():
    """The seed must be an integer >= 0."""
    with pytest.raises(ConfigError, match="seed"):
        load_dataset({"name": "synthetic_tokens", "samples": 1, "seq": 1}, seed=-1)


# --- synthetic tokens ------------------------------------------------------------------------


def test_synthetic_tokens_shapes_and_shift():
    """Tokens are int64 ids < vocab of shape (samples, seq); y is x shifted left by one."""
    config = {"name": "synthetic_tokens", "vocab": 100, "seq": 16, "samples": 8}
    data = load_dataset(config, seed=1)
    assert data.x_train.shape == data.y_train.shape == (8, 16)
    assert data.x_train.dtype == data.y_train.dtype == np.int64
    assert data.x_train.min() >= 0
    assert data.x_train.max() < 100
    assert np.array_equal(data.x_train[:, 1:], data.y_train[:, :-1])
    assert data.x_test.shape == (0, 16)
    assert data.classes == 100
    assert data.bytes_per_sample == 16 * 2


def test_synthetic_tokens_deterministic_per_seed():
    """One seed gives the same tokens; another seed gives different tokens."""
    config = {"name": "synthetic_tokens", "vocab": 50257, "seq": 32, "samples": 4}
    a, b, c = (load_dataset(config, seed=s) for s in (5, 5, 6))
    assert np.array_equal(a.x_train, b.x_train)
    assert np.array_equal(a.y_train, b.y_train)
    assert not np.array_equal(a.x_train, c.x_train)


def test_large_vocab_stores_four_byte_ids():
    """Vocabularies above 65536 ids need uint32 storage: 4 bytes per token."""
    config = {"name": "synthetic_tokens", "vocab": 65537, "seq": 8, "samples": 1}
    assert load_dataset(config, seed=0).bytes_per_sample == 32


def test_synthetic_tokens_defaults():
    """With only a name, synthetic tokens use vocab 50257, seq 2048, 1024 samples."""
    data = load_dataset({"name": "synthetic_tokens"}, seed=0)
    assert data.x_train.shape == (1024, 2048)
    assert data.classes == 50257


# --- batches ---------------------------------------------------------------------------------


def test_batch_indices_cover_each_index_once_per_epoch():
    """One epoch's batches are disjoint, of size batch, and cover n // batch * batch indices."""
    n, batch = 103, 10
    assert steps_per_epoch(n, batch) == 10
    epoch = np.concatenate([batch_indices(n, batch, step, seed=4) for step in range(10)])
    assert epoch.dtype == np.int64
    assert len(epoch) == len(set(epoch.tolist())) == 100
    assert set(epoch.tolist()) <= set(range(n))
    full = np.concatenate([batch_indices(12, 4, step, seed=4) for step in range(3)])
    assert sorted(full.tolist()) == list(range(12))


def test_batch_indices_pure_and_epochs_differ():
    """Batches depend on (n, batch, step, seed) alone; epochs and seeds reorder the samples."""
    n, batch = 64, 8
    first = [batch_indices(n, batch, step, seed=1) for step in range(24)]
    replay = [batch_indices(n, batch, step, seed=1) for step in reversed(range(24))][::-1]
    for a, b in zip(first, replay, strict=True):
        assert np.array_equal(a, b)
    epochs = [np.concatenate(first[e * 8 : (e + 1) * 8]) for e in range(3)]
    assert not np.array_equal(epochs[0], epochs[1])
    assert not np.array_equal(epochs[1], epochs[2])
    assert not np.array_equal(batch_indices(n, batch, 0, seed=2), first[0])


def test_batch_indices_match_documented_permutation():
    """Step s of epoch e is slice s of SeedSequence([seed, e])'s permutation of range(n)."""
    n, batch, seed = 50, 7, 11
    per_epoch = n // batch
    step = 2 * per_epoch + 3
    order = np.random.default_rng(np.random.SeedSequence([seed, 2])).permutation(n)
    assert np.array_equal(batch_indices(n, batch, step, seed), order[21:28])


def test_batch_indices_returns_a_writable_copy():
    """Writing into a returned batch does not change later batches."""
    a = batch_indices(20, 5, 0, seed=0)
    kept = a.copy()
    a[:] = -1
    assert np.array_equal(batch_indices(20, 5, 0, seed=0), kept)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((10, 0, 0, 0), "batch"),
        ((10, 11, 0, 0), "batch"),
        ((0, 1, 0, 0), "n"),
        ((10, 2, -1, 0), "step"),
        ((10, 2, 0, -3), "seed"),
        ((10, 2.0, 0, 0), "batch"),
    ],
)
def test_batch_indices_bad_arguments(args, field):
    """batch must be in [1, n], n >= 1, step >= 0 and seed >= 0, else a ConfigError naming it."""
    with pytest.raises(ConfigError, match=rf"^{field} is"):
        batch_indices(*args)


# --- input pipeline --------------------------------------------------------------------------


def test_input_pipeline_defaults_and_overrides():
    """No input section gives the documented defaults; given keys override them."""
    assert input_pipeline(None) == InputPipeline()
    assert input_pipeline(None).workers == DEFAULT_WORKERS
    pipe = input_pipeline({"workers": 4, "samples_per_s_per_worker": 10.0})
    assert pipe.workers == 4
    assert pipe.samples_per_s_per_worker == 10.0
    assert pipe.bytes_per_s_per_worker == InputPipeline().bytes_per_s_per_worker


def test_input_pipeline_rate_is_min_of_read_and_decode():
    """Supply = workers * min(bytes/s / bytes per sample, decode samples/s)."""
    pipe = InputPipeline(workers=4, bytes_per_s_per_worker=1000.0, samples_per_s_per_worker=50.0)
    assert pipe.samples_per_s(10) == pytest.approx(4 * 50.0)  # decode-bound
    assert pipe.samples_per_s(100) == pytest.approx(4 * 10.0)  # read-bound


def test_input_bound_flags_a_slow_pipeline():
    """A pipeline slower than the wafer is flagged, with stall = 1 - supply / demand."""
    pipe = InputPipeline(workers=2, bytes_per_s_per_worker=1000.0, samples_per_s_per_worker=50.0)
    slow = input_bound(pipe, 10, wafer_samples_per_s=400.0)
    assert slow["input_samples_per_s"] == pytest.approx(100.0)
    assert slow["suspected_input_bottleneck"] is True
    assert slow["input_stall_fraction"] == pytest.approx(0.75)
    fast = input_bound(pipe, 10, wafer_samples_per_s=60.0)
    assert fast["suspected_input_bottleneck"] is False
    assert fast["input_stall_fraction"] == 0.0


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"threads": 4}, "threads"),
        ({"workers": 0}, "input.workers"),
        ({"workers": 1025}, "input.workers"),
        ({"workers": 2.5}, "input.workers"),
        ({"bytes_per_s_per_worker": 0}, "input.bytes_per_s_per_worker"),
        ({"bytes_per_s_per_worker": math.inf}, "input.bytes_per_s_per_worker"),
        ({"samples_per_s_per_worker": -1.0}, "input.samples_per_s_per_worker"),
        ("fast", "input"),
    ],
)
def test_bad_input_config_names_the_key(config, field):
    """Unknown input keys and out-of-range values are ConfigErrors naming the key."""
    with pytest.raises(ConfigError, match=field):
        input_pipeline(config)


def test_input_bound_rejects_bad_demand_and_size():
    """wafer_samples_per_s must be > 0 and bytes_per_sample an integer >= 1."""
    with pytest.raises(ConfigError, match="wafer_samples_per_s"):
        input_bound(InputPipeline(), 64, 0.0)
    with pytest.raises(ConfigError, match="bytes_per_sample"):
        input_bound(InputPipeline(), 0, 10.0)
