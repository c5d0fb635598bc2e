"""Checkpoints of a materialised weight store in HDF5, written atomically.

Layout: group ``weights`` (one float32 dataset per tensor), group ``state/<slot>`` (one
float32 dataset per tensor that has that optimizer slot), and attributes ``format``,
``format_version``, ``step``, ``seed`` (-1: none), ``init_std``, ``dtype``, ``optimizer``
(JSON, ``""``: none), ``rng_state`` (JSON of a numpy bit generator's state, ``""``: none) and
``wafersim_version`` and ``meta`` (JSON of what the caller keeps with the weights, such as
a run's config hash and loss history; ``""``: none). The attribute ``checksums`` (format
version 3) holds the SHA-256 of every other thing in the file: each attribute's value and
type, each dataset's dtype, shape and bytes, and which groups there are. Reading checks them
all first: one changed digit of the loss history, a moved ``step``, or a flipped bit of a
weight is an error naming what changed, never a resume that silently trains differently.
Older versions checked the weights only, so they are refused, not read unchecked.
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
from wafersim.wafer.atomic import atomic_hdf5
from wafersim.wafer.errors import ConfigError, excerpt

from wafersim import wafer

FORMAT = "wafersim-memoryx-checkpoint"
FORMAT_VERSION = 3  # 3: a SHA-256 of every attribute and dataset (2: of datasets only)
CHECKSUMS = "checksums"  # the root attribute holding the others' SHA-256, as JSON


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
    with atomic_hdf5(path) as f:
        f.attrs.update(attrs)
        _write_group(f.create_group("weights"), weights)
        _write_state(f.create_group("state"), store.state())
        f.attrs[CHECKSUMS] = json.dumps(_checksums(f), sort_keys=True)  # of what was written


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint`; anything else raises ConfigError."""
    path = Path(path)
    if not path.is_file() or not h5py.is_hdf5(path):
        raise ConfigError(f"{path}: not an HDF5 file, so not a wafersim MemoryX checkpoint")
    try:
        with h5py.File(path, "r") as f:
            return _read_checkpoint(f)
    except (KeyError, ValueError, TypeError, OSError, RecursionError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError(f"{path}: not a valid wafersim MemoryX checkpoint: {message}") from None


def restore_rng(state: dict[str, Any]) -> np.random.Generator:
    """A generator in the saved bit-generator ``state`` (e.g. a data loader's stream)."""
    bit_generator = getattr(np.random, state["bit_generator"])()
    bit_generator.state = state
    return np.random.Generator(bit_generator)


def _write_group(group: h5py.Group, arrays: dict[str, np.ndarray]) -> None:
    for name, array in arrays.items():
        group.create_dataset(name, data=array)


def _write_state(group: h5py.Group, state: dict[str, dict[str, np.ndarray]]) -> None:
    for slot, arrays in state.items():
        _write_group(group.create_group(slot), arrays)


def _checksums(f: h5py.File) -> dict[str, str]:
    """The SHA-256 of everything in ``f`` but the checksums themselves, by what it is: every
    attribute (``attribute step of /``), dataset (``/weights/w``) and group (``group /state``)."""
    objects: list[Any] = [f]
    f.visititems(lambda _name, obj: objects.append(obj))
    sums = {}
    for obj in objects:
        if isinstance(obj, h5py.Dataset):
            sums[obj.name] = _value_sha256(obj[()])
        elif obj is not f:
            sums[f"group {obj.name}"] = "group"
        for key in obj.attrs:
            if obj is not f or key != CHECKSUMS:
                sums[f"attribute {key} of {obj.name}"] = _value_sha256(obj.attrs[key])
    return sums


def _value_sha256(value: Any) -> str:
    """SHA-256 of a value's type, shape and contents as h5py reads them back."""
    digest = hashlib.sha256()
    if isinstance(value, str):
        digest.update(b"str:" + value.encode("utf-8", "surrogatepass"))
    elif isinstance(value, bytes):
        digest.update(b"bytes:" + value)
    else:
        array = np.asarray(value)
        digest.update(f"{array.dtype.str}{array.shape}:".encode())
        if array.dtype.kind in "biufcS":
            digest.update(array.tobytes())
        else:
            digest.update(repr(array.tolist()).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _verify(f: h5py.File) -> None:
    """Refuse a file whose contents differ from what its checksums say was saved."""
    saved = _saved_checksums(f)
    found = _checksums(f)
    for what in sorted(saved.keys() | found.keys()):
        if what not in found:
            raise ValueError(f"{what} is missing (removed since saved)")
        if what not in saved:
            raise ValueError(f"{what} was not saved (added since)")
        if saved[what] != found[what]:
            raise ValueError(f"{what} fails its checksum (changed since saved)")


def _saved_checksums(f: h5py.File) -> dict[str, str]:
    try:
        saved = json.loads(str(f.attrs.get(CHECKSUMS, "null")))
    except json.JSONDecodeError:
        saved = None
    if not isinstance(saved, dict) or not all(isinstance(v, str) for v in saved.values()):
        raise ValueError(f"the {CHECKSUMS} attribute is missing or not a table of SHA-256s")
    return saved


def _read_checkpoint(f: h5py.File) -> Checkpoint:
    if f.attrs.get("format") != FORMAT:
        found = _shown(f.attrs.get("format"))
        raise ValueError(f"format attribute is {found}, expected {FORMAT!r}")
    version = f.attrs.get("format_version")
    if isinstance(version, np.ndarray) or version != FORMAT_VERSION:
        raise ValueError(
            f"format_version is {_shown(version)}; this wafersim reads only {FORMAT_VERSION} "
            "(older versions do not checksum their metadata)"
        )
    _verify(f)
    seed = int(f.attrs["seed"])
    store = WeightStore.from_arrays(
        weights=_read_group(f["weights"]),
        state={slot: _read_group(group) for slot, group in f["state"].items()},
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


def _shown(value: Any) -> str:
    """A read attribute as the user wrote it (``2``, not numpy's ``np.int64(2)``), cut short."""
    return excerpt(value.item() if isinstance(value, np.generic) else value)


def _read_group(group: h5py.Group) -> dict[str, np.ndarray]:
    out = {}
    for name, data in group.items():
        if not isinstance(data, h5py.Dataset) or data.dtype != np.float32:
            raise ValueError(f"{data.name} is not a float32 dataset")
        out[name] = data[()]
    return out
