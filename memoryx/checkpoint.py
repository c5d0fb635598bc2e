"""Checkpoints of a materialised weight store in HDF5, written atomically.

Layout: group ``weights`` (one float32 dataset per tensor), group ``state/<slot>`` (one
float32 dataset per tensor that has that optimizer slot), and attributes ``format``,
``format_version``, ``step``, ``seed`` (-1: none), ``init_std``, ``dtype``, ``optimizer``
(JSON, ``""``: none), ``rng_state`` (JSON of a numpy bit generator's state, ``""``: none) and
``wafersim_version`` and ``meta`` (JSON of what the caller keeps with the weights, such as
a run's config hash and loss history; ``""``: none). Every dataset carries the SHA-256 of
its bytes (attribute ``sha256``, format version 2), checked when it is read: a flipped bit
or overwritten bytes are an error naming the dataset, never silently different weights.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, NamedTuple

import h5py
import numpy as np
from wafersim.memoryx.optimizer import Optimizer, optimizer_from_dict
from wafersim.memoryx.store import WeightStore
from wafersim.wafer.atomic import atomic_path
from wafersim.wafer.errors import ConfigError

from wafersim import wafer

FORMAT = "wafersim-memoryx-checkpoint"
FORMAT_VERSION = 2  # 2: a SHA-256 on every dataset
READABLE_VERSIONS = (1, 2)  # 1: written before checksums; read unchecked


class Checkpoint(NamedTuple):
    """What :func:`load_checkpoint` returns."""

    store: WeightStore
    step: int  # optimizer steps completed
    optimizer: Optimizer | None
    rng_state: dict[str, Any] | None  # np.random.Generator.bit_generator.state, if saved
    wafersim_version: str
    meta: dict[str, Any] | None = None  # the caller's JSON-ready extras, if saved


def save_checkpoint(
    path: str | Path,
    store: WeightStore,
    step: int,
    optimizer: Optimizer | None = None,
    rng: np.random.Generator | None = None,
    meta: dict[str, Any] | None = None,
) -> None:
    """Write ``store`` (weights and optimizer state), ``step``, the optimizer's settings,
    ``rng``'s state and ``meta`` (JSON-ready) to HDF5 at ``path``; a crash midway leaves any
    earlier file intact."""
    if not isinstance(step, int | np.integer) or isinstance(step, bool) or step < 0:
        raise ConfigError(f"step is {step!r}; allowed: an integer >= 0")
    weights = {name: store.get(name) for name in store.names}  # timing-only raises here
    attrs = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "step": int(step),
        "seed": -1 if store.seed is None else int(store.seed),
        "init_std": float(store.init_std),
        "dtype": store.dtype,
        "optimizer": "" if optimizer is None else json.dumps(optimizer.to_dict(), sort_keys=True),
        "rng_state": "" if rng is None else json.dumps(rng.bit_generator.state),
        "wafersim_version": wafer.__version__,
        "meta": "" if meta is None else json.dumps(meta, sort_keys=True),
    }
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        f.attrs.update(attrs)
        _write_group(f.create_group("weights"), weights)
        _write_state(f.create_group("state"), store.state())


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint`; anything else raises ConfigError."""
    path = Path(path)
    if not path.is_file() or not h5py.is_hdf5(path):
        raise ConfigError(f"{path}: not an HDF5 file, so not a wafersim MemoryX checkpoint")
    try:
        with h5py.File(path, "r") as f:
            return _read_checkpoint(f)
    except (KeyError, ValueError, TypeError, OSError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError(f"{path}: not a valid wafersim MemoryX checkpoint: {message}") from None


def restore_rng(state: dict[str, Any]) -> np.random.Generator:
    """A generator in the saved bit-generator ``state`` (e.g. a data loader's stream)."""
    bit_generator = getattr(np.random, state["bit_generator"])()
    bit_generator.state = state
    return np.random.Generator(bit_generator)


def _write_group(group: h5py.Group, arrays: dict[str, np.ndarray]) -> None:
    for name, array in arrays.items():
        data = group.create_dataset(name, data=array)
        data.attrs["sha256"] = _sha256(np.asarray(array, np.float32))


def _sha256(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _write_state(group: h5py.Group, state: dict[str, dict[str, np.ndarray]]) -> None:
    for slot, arrays in state.items():
        _write_group(group.create_group(slot), arrays)


def _read_checkpoint(f: h5py.File) -> Checkpoint:
    if f.attrs.get("format") != FORMAT:
        raise ValueError(f"format attribute is {f.attrs.get('format')!r}, expected {FORMAT!r}")
    version = f.attrs.get("format_version")
    if version not in READABLE_VERSIONS:
        raise ValueError(f"format_version is {version!r}; this wafersim reads {READABLE_VERSIONS}")
    checked = version >= 2
    seed = int(f.attrs["seed"])
    store = WeightStore.from_arrays(
        weights=_read_group(f["weights"], checked),
        state={slot: _read_group(group, checked) for slot, group in f["state"].items()},
        seed=None if seed < 0 else seed,
        init_std=float(f.attrs["init_std"]),
    )
    optimizer = str(f.attrs["optimizer"])
    rng_state = str(f.attrs["rng_state"])
    meta = str(f.attrs.get("meta", ""))
    return Checkpoint(
        store=store,
        step=int(f.attrs["step"]),
        optimizer=optimizer_from_dict(json.loads(optimizer)) if optimizer else None,
        rng_state=json.loads(rng_state) if rng_state else None,
        wafersim_version=str(f.attrs["wafersim_version"]),
        meta=json.loads(meta) if meta else None,
    )


def _read_group(group: h5py.Group, checked: bool) -> dict[str, np.ndarray]:
    out = {}
    for name, data in group.items():
        if not isinstance(data, h5py.Dataset) or data.dtype != np.float32:
            raise ValueError(f"{data.name} is not a float32 dataset")
        out[name] = data[()]
        if checked and data.attrs.get("sha256") != _sha256(out[name]):
            raise ValueError(f"{data.name} fails its checksum (its bytes changed since saved)")
    return out
