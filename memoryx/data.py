"""Training data for ``wafersim run``: data sets, seeded batches and the host input pipeline.

Data sets (the run config's ``data`` section; ``name`` picks one, the other keys are its own):

* ``digits`` (``test_fraction``, default 0.2): the 8x8 handwritten digits, shipped with
  wafersim (``memoryx/datasets/digits.csv.gz``, scikit-learn's copy; no download). 64
  features scaled to [0, 1], 10 classes. The train/test split is stratified: each class's
  samples are shuffled and ``round(test_fraction * count)`` of them go to the test set.
* ``mnist`` (``path``): the four IDX files of MNIST in a folder, each plain or gzipped
  (``.gz``); a plain file wins over its ``.gz`` twin. Images are flattened and scaled to [0, 1].
* ``synthetic_tokens`` (``vocab``, ``seq``, ``samples``): uniform random token ids for language
  models. Here ``x_train`` holds int64 token ids of shape (samples, seq) (not float32 features)
  and ``y_train`` the next-token ids of the same shape: one row of ``seq + 1`` ids is drawn
  per sample, ``x`` is its first ``seq`` ids and ``y`` its last ``seq``. The test set is empty.

Seeds: the split and the synthetic tokens are drawn from streams of the run seed tagged with
:data:`SPLIT_STREAM` and :data:`TOKENS_STREAM`; epoch ``e``'s batch order comes from
``SeedSequence([seed, e])``. A bare ``SeedSequence(seed)`` is not used because it equals
``SeedSequence([seed, 0])`` (trailing zero words do not change the entropy pool), so it would
replay epoch 0's stream.

Batches: every epoch is a permutation of ``range(n)`` drawn from (seed, epoch) alone, cut into
consecutive batches; the incomplete tail of an epoch is dropped (``n // batch`` steps per epoch).
:func:`batch_indices` is a pure function of its arguments, so a resumed run sees the same
batches.

Input pipeline: ``workers`` host workers each read ``bytes_per_s_per_worker`` and decode at
most ``samples_per_s_per_worker``; their supply is compared with the wafer's demand.
"""

from __future__ import annotations

import functools
import gzip
import math
import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from wafersim.wafer.config_io import exists
from wafersim.wafer.errors import ConfigError, excerpt

FEATURE_DTYPE = np.float32
LABEL_DTYPE = np.int64
SPLIT_STREAM = (0xDA7A, 1)  # spawn key of the train/test split stream
TOKENS_STREAM = (0xDA7A, 2)  # spawn key of the synthetic token stream

DIGITS_MAX_PIXEL = 16.0  # the digits hold pixel counts 0..16
# The digits as scikit-learn ships them, byte for byte (datasets/README.md: source, license)
DIGITS_FILE = Path(__file__).with_name("datasets") / "digits.csv.gz"
DIGITS_CLASSES = 10
DIGITS_BYTES_PER_SAMPLE = 64  # 8x8 pixels, one byte each
TEST_FRACTION_MAX = 0.9

MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
IDX_IMAGES_MAGIC = 0x00000803  # unsigned bytes, 3 dimensions
IDX_LABELS_MAGIC = 0x00000801  # unsigned bytes, 1 dimension
IDX_MAX_HEADER_BYTES = 16  # the magic and three dimensions, the most either file has
MNIST_CLASSES = 10
MNIST_MAX_PIXEL = 255.0

VOCAB_RANGE = (2, 10**7)
SEQ_RANGE = (1, 10**6)
MAX_MATERIALISED_SAMPLES = 65536  # token samples held in host memory at most
MAX_MATERIALISED_TOKENS = 2**27  # samples * seq at most: 1 GiB of int64 ids
UINT16_VOCAB = 2**16  # vocabularies up to this size store ids as uint16, larger as uint32

# Input pipeline defaults. ASSUMPTIONS, not measurements: a modest host with 8 loader workers,
# each reading about 1 GB/s (one NVMe drive or a 10 GbE share) and decoding about 1e5 small
# samples per second (pre-tokenised or tiny images; real augmentation is far slower).
DEFAULT_WORKERS = 8
DEFAULT_BYTES_PER_S_PER_WORKER = 1e9
DEFAULT_SAMPLES_PER_S_PER_WORKER = 1e5
WORKERS_RANGE = (1, 1024)


@dataclass(frozen=True, eq=False)
class Dataset:
    """A loaded data set; its arrays are read-only.

    ``x_*`` are float32 features (N, features), or int64 token ids (N, seq) for token data;
    ``y_*`` are int64 labels (N,), or int64 next-token ids (N, seq). ``classes`` is the number
    of classes or the vocabulary size; ``bytes_per_sample`` is one sample's raw host storage.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: int
    bytes_per_sample: int


@dataclass(frozen=True)
class DatasetSize:
    """A data set's sizes, read without making its arrays, so a run checks them first."""

    name: str
    train_samples: int
    features: int  # per sample: features, or tokens per sequence for token data
    classes: int  # classes, or the vocabulary size
    tokens: bool  # samples are token ids, not features


def load_dataset(config: dict[str, Any], seed: int) -> Dataset:
    """The data set described by the run config's ``data`` section, drawn with ``seed``."""
    kind, params, seed = _resolve(config, seed)
    return kind.load(params, seed)


def dataset_size(config: dict[str, Any], seed: int) -> DatasetSize:
    """The sizes of the data set :func:`load_dataset` would load, its keys checked the same
    way, from file headers alone: cheap enough to check before any costly work."""
    kind, params, seed = _resolve(config, seed)
    return kind.size(params, seed)


def _resolve(config: dict[str, Any], seed: int) -> tuple[DatasetKind, dict[str, Any], int]:
    """The data set's kind, its keys with defaults filled in, and the checked seed."""
    if not isinstance(config, dict):
        raise ConfigError(f"data must be a table of keys, got {excerpt(config)}")
    name = config.get("name")
    if not isinstance(name, str) or name not in DATASETS:
        raise ConfigError(f"data.name is {excerpt(name)}; allowed: {sorted(DATASETS)}")
    seed = _check_int("seed", seed, 0, math.inf)
    kind = DATASETS[name]
    return kind, _with_defaults(name, config, kind.defaults), seed


def steps_per_epoch(n: int, batch: int) -> int:
    """Optimizer steps per epoch of ``n`` samples: ``n // batch`` (the tail is dropped)."""
    n = _check_int("n", n, 1, math.inf)
    return n // _check_int("batch", batch, 1, n)


def batch_indices(n: int, batch: int, step: int, seed: int) -> np.ndarray:
    """The int64 sample indices of 0-based optimizer ``step``, a slice of its epoch's order."""
    per_epoch = steps_per_epoch(n, batch)
    step = _check_int("step", step, 0, math.inf)
    seed = _check_int("seed", seed, 0, math.inf)
    epoch, k = divmod(step, per_epoch)
    return _epoch_permutation(n, seed, epoch)[k * batch : (k + 1) * batch].copy()


@functools.lru_cache(maxsize=4)
def _epoch_permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    """The read-only permutation of range(n) for ``epoch``, from (seed, epoch) alone."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, epoch]))
    order = rng.permutation(n).astype(np.int64)
    order.setflags(write=False)
    return order


@dataclass(frozen=True)
class InputPipeline:
    """Host workers that read and decode samples for the wafer."""

    workers: int = DEFAULT_WORKERS
    bytes_per_s_per_worker: float = DEFAULT_BYTES_PER_S_PER_WORKER
    samples_per_s_per_worker: float = DEFAULT_SAMPLES_PER_S_PER_WORKER

    def __post_init__(self) -> None:
        _check_int("input.workers", self.workers, *WORKERS_RANGE)
        _check_positive("input.bytes_per_s_per_worker", self.bytes_per_s_per_worker)
        _check_positive("input.samples_per_s_per_worker", self.samples_per_s_per_worker)

    def samples_per_s(self, bytes_per_sample: int) -> float:
        """Samples per second all workers supply: each is bound by reading or by decoding."""
        size = _check_int("bytes_per_sample", bytes_per_sample, 1, math.inf)
        per_worker = min(self.bytes_per_s_per_worker / size, self.samples_per_s_per_worker)
        return self.workers * per_worker


def input_pipeline(config: dict[str, Any] | None) -> InputPipeline:
    """The pipeline described by the run config's ``input`` section (None: all defaults)."""
    if config is None:
        return InputPipeline()
    if not isinstance(config, dict):
        raise ConfigError(f"input must be a table of keys, got {excerpt(config)}")
    allowed = sorted(InputPipeline.__dataclass_fields__)
    _check_unknown("input", config, allowed)
    return InputPipeline(**config)


def input_bound(
    pipeline: InputPipeline, bytes_per_sample: int, wafer_samples_per_s: float
) -> dict[str, Any]:
    """Whether the host keeps up with the wafer's ``wafer_samples_per_s``, and how much it stalls.

    ``input_stall_fraction`` is ``max(0, 1 - supply / demand)``: the share of time the wafer
    would wait for input if the pipeline and the wafer overlap perfectly otherwise.
    """
    demand = _check_positive("wafer_samples_per_s", wafer_samples_per_s)
    supply = pipeline.samples_per_s(bytes_per_sample)
    return {
        "input_samples_per_s": float(supply),
        "suspected_input_bottleneck": bool(supply < demand),
        "input_stall_fraction": float(max(0.0, 1.0 - supply / demand)),
    }


# --- digits ----------------------------------------------------------------------------------


def _load_digits(params: dict[str, Any], seed: int) -> Dataset:
    """The 8x8 digits (``DIGITS_FILE``), scaled to [0, 1] and split by class from ``seed``."""
    fraction = _check_fraction("data.test_fraction", params["test_fraction"])
    x, y = _digits_table()
    train, test = _stratified_split(y, fraction, seed)
    return _dataset(
        "digits", (x[train], y[train], x[test], y[test]), DIGITS_CLASSES, DIGITS_BYTES_PER_SAMPLE
    )


def _digits_size(params: dict[str, Any], seed: int) -> DatasetSize:
    """The digits' training samples: ``count - round(test_fraction * count)`` per class."""
    del seed  # the split's sizes do not depend on it
    fraction = _check_fraction("data.test_fraction", params["test_fraction"])
    x, y = _digits_table()
    counts = np.unique(y, return_counts=True)[1]
    train = sum(int(count) - round(fraction * int(count)) for count in counts)
    return DatasetSize("digits", train, x.shape[1], DIGITS_CLASSES, False)


@functools.lru_cache(maxsize=1)
def _digits_table() -> tuple[np.ndarray, np.ndarray]:
    """The digits' read-only features and labels, read once for the size check and the load."""
    table = np.loadtxt(DIGITS_FILE, delimiter=",")  # as sklearn's load_digits reads it
    x = (table[:, :-1] / DIGITS_MAX_PIXEL).astype(FEATURE_DTYPE)
    y = table[:, -1].astype(LABEL_DTYPE)
    for array in (x, y):
        array.setflags(write=False)
    return x, y


def _stratified_split(y: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Shuffled train and test indices with ``round(fraction * count)`` of each class in test."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=SPLIT_STREAM))
    train, test = [], []
    for label in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == label))
        cut = round(fraction * len(members))
        test.append(members[:cut])
        train.append(members[cut:])
    return rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(test))


def _check_fraction(field: str, value: object) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not 0.0 < value <= TEST_FRACTION_MAX:  # also NaN, which compares false
        raise ConfigError(
            f"{field} is {excerpt(value)}; allowed: a number in (0, {TEST_FRACTION_MAX}]"
        )
    return float(value)


# --- MNIST (IDX files) -----------------------------------------------------------------------


def _load_mnist(params: dict[str, Any], seed: int) -> Dataset:
    """The four MNIST IDX files in folder ``path``, flattened and scaled to [0, 1]."""
    del seed  # MNIST has a fixed split
    paths = _mnist_paths(params)
    arrays = {key: read_idx(path) for key, path in paths.items()}
    _check_mnist(paths, arrays)
    x_train, x_test = arrays["train_images"], arrays["test_images"]
    features = x_train.shape[1] * x_train.shape[2]
    parts = (
        _scale_images(x_train, features),
        arrays["train_labels"].astype(LABEL_DTYPE),
        _scale_images(x_test, features),
        arrays["test_labels"].astype(LABEL_DTYPE),
    )
    return _dataset("mnist", parts, MNIST_CLASSES, features)


def _mnist_size(params: dict[str, Any], seed: int) -> DatasetSize:
    """MNIST's sizes from the four IDX files' headers, checked as the load checks them."""
    del seed  # MNIST has a fixed split
    paths = _mnist_paths(params)
    shapes = {key: idx_shape(path) for key, path in paths.items()}
    _check_mnist_shapes(paths, shapes)
    count, rows, cols = shapes["train_images"]
    return DatasetSize("mnist", count, rows * cols, MNIST_CLASSES, False)


def _mnist_paths(params: dict[str, Any]) -> dict[str, Path]:
    """The four IDX files of folder ``data.path`` (plain or gzipped), by their role."""
    folder = _check_folder("data.path", params["path"])
    return {key: _find_idx(folder, stem) for key, stem in MNIST_FILES.items()}


def _check_mnist(paths: dict[str, Path], arrays: dict[str, np.ndarray]) -> None:
    """The files' shapes agree (:func:`_check_mnist_shapes`) and every label is a digit."""
    _check_mnist_shapes(paths, {key: array.shape for key, array in arrays.items()})
    for part in ("train", "test"):
        labels = arrays[f"{part}_labels"]
        if labels.size and int(labels.max()) >= MNIST_CLASSES:
            raise ConfigError(
                f"{paths[f'{part}_labels']}: label {int(labels.max())}; allowed: "
                f"0..{MNIST_CLASSES - 1}"
            )


def _check_mnist_shapes(paths: dict[str, Path], shapes: dict[str, tuple[int, ...]]) -> None:
    """Images are 3-D of one size, labels 1-D, one per image; training is not empty."""
    for key, shape in shapes.items():
        ndim = 3 if key.endswith("images") else 1
        if len(shape) != ndim:
            raise ConfigError(f"{paths[key]}: {len(shape)}-D IDX data; allowed: {ndim}-D")
    for part in ("train", "test"):
        images, labels = shapes[f"{part}_images"][0], shapes[f"{part}_labels"][0]
        if images != labels:
            raise ConfigError(
                f"{paths[f'{part}_labels']}: {labels} labels for {images} images; allowed: "
                "one per image"
            )
    train, test = shapes["train_images"], shapes["test_images"]
    if train[0] == 0:
        raise ConfigError(f"{paths['train_images']}: holds no images; allowed: at least one")
    if train[1:] != test[1:]:
        raise ConfigError(
            f"{paths['test_images']}: images are {test[1:]}, training images "
            f"{train[1:]}; allowed: one size"
        )


def _scale_images(images: np.ndarray, features: int) -> np.ndarray:
    flat = images.reshape(len(images), features).astype(FEATURE_DTYPE)
    return flat / FEATURE_DTYPE(MNIST_MAX_PIXEL)


def _check_folder(field: str, value: object) -> Path:
    if not isinstance(value, str | os.PathLike) or not str(value):
        raise ConfigError(f"{field} is {excerpt(value)}; allowed: a folder path")
    folder = Path(value)
    if not exists(folder, folder=True):
        raise ConfigError(f"{field} is {excerpt(str(value))}; allowed: an existing folder")
    return folder


def _find_idx(folder: Path, stem: str) -> Path:
    """``folder/stem``, or ``folder/stem.gz`` when only the gzipped file exists."""
    for path in (folder / stem, folder / f"{stem}.gz"):
        if path.is_file():
            return path
    raise ConfigError(f"{folder / stem}: missing (neither it nor {stem}.gz exists)")


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """The uint8 array in IDX file ``path`` (gzipped when its name ends in ``.gz``).

    Only unsigned-byte IDX files are read: magic 0x00000803 (3-D, images) or 0x00000801 (1-D,
    labels), then one big-endian uint32 per dimension, then exactly the data bytes.
    """
    path = Path(path)
    data = _read_bytes(path)
    dims = _idx_dims(path, data)
    header = 4 + 4 * len(dims)
    expected = header + math.prod(dims)
    if len(data) != expected:
        raise ConfigError(
            f"{path}: {len(data)} bytes, but dimensions {dims} need {expected}; "
            "the file is truncated or has trailing bytes"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)


def idx_shape(path: str | os.PathLike) -> tuple[int, ...]:
    """The dimensions in IDX file ``path``'s header, read without its data."""
    path = Path(path)
    return _idx_dims(path, _read_bytes(path, IDX_MAX_HEADER_BYTES))


def _idx_dims(path: Path, data: bytes) -> tuple[int, ...]:
    """The dimensions in the IDX header at the start of ``data`` (read from ``path``)."""
    if len(data) < 4:
        raise ConfigError(f"{path}: {len(data)} bytes, too short for an IDX header")
    magic = int.from_bytes(data[:4], "big")
    if magic not in (IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC):
        raise ConfigError(
            f"{path}: bad magic number 0x{magic:08x}; allowed: 0x{IDX_IMAGES_MAGIC:08x} "
            f"(images) or 0x{IDX_LABELS_MAGIC:08x} (labels)"
        )
    ndim = magic & 0xFF
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ConfigError(f"{path}: truncated header ({len(data)} of {header} bytes)")
    return tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))


def _read_bytes(path: Path, count: int = -1) -> bytes:
    """The first ``count`` bytes of ``path`` (-1: all), gunzipped when it ends in ``.gz``."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as handle:
                return handle.read(count)
        with path.open("rb") as handle:
            return handle.read(count)
    except (OSError, EOFError, zlib.error) as error:
        raise ConfigError(f"{path}: cannot be read ({error})") from None


# --- synthetic tokens ------------------------------------------------------------------------


def _load_tokens(params: dict[str, Any], seed: int) -> Dataset:
    """Uniform random token ids from ``seed``; ``y`` is ``x`` shifted left by one token."""
    size = _tokens_size(params, seed)
    vocab, seq, samples = size.classes, size.features, size.train_samples
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=TOKENS_STREAM))
    rows = rng.integers(0, vocab, size=(samples, seq + 1), dtype=np.int64)
    empty = np.zeros((0, seq), dtype=np.int64)
    id_bytes = 2 if vocab <= UINT16_VOCAB else 4  # uint16 ids when they fit, else uint32
    parts = (rows[:, :-1], rows[:, 1:], empty, empty)
    return _dataset("synthetic_tokens", parts, vocab, seq * id_bytes)


def _tokens_size(params: dict[str, Any], seed: int) -> DatasetSize:
    """The token data's checked sizes: ``samples`` of ``seq`` ids below ``vocab``."""
    del seed  # the sizes do not depend on it
    vocab = _check_int("data.vocab", params["vocab"], *VOCAB_RANGE)
    seq = _check_int("data.seq", params["seq"], *SEQ_RANGE)
    samples = _check_int("data.samples", params["samples"], 1, MAX_MATERIALISED_SAMPLES)
    if samples * seq > MAX_MATERIALISED_TOKENS:
        raise ConfigError(
            f"data.samples * data.seq is {samples} * {seq} = {samples * seq}; allowed: at most "
            f"{MAX_MATERIALISED_TOKENS} materialised tokens"
        )
    return DatasetSize("synthetic_tokens", samples, seq, vocab, True)


# --- shared helpers --------------------------------------------------------------------------


def _dataset(name: str, parts: tuple[np.ndarray, ...], classes: int, size: int) -> Dataset:
    """A Dataset whose four arrays are read-only."""
    frozen = []
    for array in parts:
        view = array.view()
        view.setflags(write=False)
        frozen.append(view)
    return Dataset(name, *frozen, classes=classes, bytes_per_sample=size)


def _with_defaults(name: str, config: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """The data set's keys with defaults filled in; unknown or missing keys are errors."""
    allowed = ["name", *sorted(defaults)]
    _check_unknown("data", config, allowed)
    params = {**defaults, **{k: v for k, v in config.items() if k != "name"}}
    missing = sorted(k for k, v in params.items() if v is None)
    if missing:
        raise ConfigError(f"data.name {name!r} needs key(s) {missing}; allowed keys: {allowed}")
    return params


def _check_unknown(section: str, config: dict[str, Any], allowed: list[str]) -> None:
    unknown = sorted(set(config) - set(allowed), key=str)
    if unknown:
        raise ConfigError(f"unknown key(s) in {section}: {excerpt(unknown)}; allowed: {allowed}")


def _check_int(field: str, value: object, low: float, high: float) -> int:
    ok = isinstance(value, int | np.integer) and not isinstance(value, bool)
    if not ok or not low <= value <= high:
        allowed = f">= {low}" if high == math.inf else f"in [{low}, {high}]"
        raise ConfigError(f"{field} is {excerpt(value)}; allowed: an integer {allowed}")
    return int(value)


def _check_positive(field: str, value: object) -> float:
    ok = isinstance(value, int | float | np.number) and not isinstance(value, bool)
    if not ok or not _finite(value) or value <= 0:
        raise ConfigError(f"{field} is {excerpt(value)}; allowed: a finite number > 0")
    return float(value)


def _finite(value: float) -> bool:
    """Whether ``value`` is a finite float: an integer too large for one is not."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


@dataclass(frozen=True)
class DatasetKind:
    """One data set: its loader, its sizes without loading, its keys with defaults (None marks
    a required key)."""

    load: Callable[[dict[str, Any], int], Dataset]
    size: Callable[[dict[str, Any], int], DatasetSize]
    defaults: dict[str, Any]


DATASETS: dict[str, DatasetKind] = {
    "digits": DatasetKind(_load_digits, _digits_size, {"test_fraction": 0.2}),
    "mnist": DatasetKind(_load_mnist, _mnist_size, {"path": None}),
    "synthetic_tokens": DatasetKind(
        _load_tokens, _tokens_size, {"vocab": 50257, "seq": 2048, "samples": 1024}
    ),
}
