"""Defect maps: which PEs and which wires of a physical wafer are dead.

A :class:`DefectMap` is an immutable product of the pipeline (spec + defect map -> logical grid
-> ...). It is made by one of the models in :data:`DEFECT_MODELS` through :func:`generate`,
and saved to / loaded from HDF5.

Random models place *defects* on PE tiles. A tile's expected number of defects is
``lambda = D * area_mm2 / 100`` for a density ``D`` per cm^2 (or ``-log(1 - p)`` for a
probability ``p`` that a tile has at least one defect). Each defect independently lands on one
of the tile's two outgoing wires (east or south, chosen uniformly; the wire then is dead both
ways) with probability ``link_defect_fraction``, and otherwise kills the PE.
``link_defect_fraction`` defaults to :data:`LINK_DEFECT_FRACTION`, an assumption (wires are a
small part of a tile's area), not a published figure.

- ``poisson``: every tile's defect count is Poisson(lambda), independently.
- ``clustered``: the wafer is cut into square blocks of ``cluster_size_pes`` tiles a side; each
  block draws a density multiplier ``G ~ Gamma(alpha, 1/alpha)`` (mean 1), and each tile in it
  gets Poisson(lambda * G) defects, so a block of ``n`` tiles holds a negative-binomial number
  of defects with mean ``n*lambda`` and variance ``n*lambda + (n*lambda)**2 / alpha``
  (Stapper's block-clustered model).
- ``explicit``: the dead PEs and wires listed in a ``.toml``, ``.yaml`` or ``.json`` file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.atomic import atomic_hdf5
from wafersim.wafer.config_io import exists, load_mapping
from wafersim.wafer.errors import EXCERPT_CHARS, ConfigError, DefectMapError, excerpt
from wafersim.wafer.geometry import (
    NUM_DIRS,
    E,
    N,
    S,
    W,
    direction_index,
    links_symmetric,
    mirror_links,
)
from wafersim.wafer.spec import WaferSpec, spec_from_dict

from wafersim import wafer

FORMAT = "wafersim-defect-map"
FORMAT_VERSION = 1
LINK_DEFECT_FRACTION = 0.05  # assumption: share of a tile's defects that cut a wire
CLUSTER_SIZE_PES = 16  # default block side of the clustered model, in tiles
CLUSTER_ALPHA = 2.0  # default clustering parameter (smaller clusters more)
MM2_PER_CM2 = 100.0
MAX_DEFECTS_PER_TILE = 1e12  # caps lambda (p = 1 gives infinity); numpy's Poisson needs finite
SPARSE_LAMBDA = 0.5  # at or below it (39 % of tiles hit), Poisson maps split one total
NUM_STREAMS = 3  # streams spawned from the user seed: defects, then two reserved
MAX_SEED = 2**63 - 1  # the largest seed a map's int64 seed attribute holds
DEFECT_STREAM = 0


@dataclass(frozen=True, eq=False)
class DefectMap:
    """Dead PEs and dead wires of one physical wafer; arrays are read-only."""

    dead_pe: np.ndarray  # bool (physical_height, physical_width)
    dead_link: np.ndarray  # bool (physical_height, physical_width, 4), symmetric
    model: str
    params: dict
    seed: int | None
    spec: WaferSpec

    __hash__ = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        shape = (self.spec.physical_height_pes, self.spec.physical_width_pes)
        object.__setattr__(self, "dead_pe", _frozen_mask("dead_pe", self.dead_pe, shape))
        links = _frozen_mask("dead_link", self.dead_link, (*shape, NUM_DIRS))
        if not links_symmetric(links):
            raise DefectMapError(
                "dead_link is not symmetric: a dead wire must be dead in both directions "
                "(use wafer.geometry.mirror_links)"
            )
        object.__setattr__(self, "dead_link", links)
        object.__setattr__(self, "params", dict(self.params))
        try:
            json.dumps(self.params)
        except TypeError as error:
            raise DefectMapError(f"params must be JSON-serialisable: {error}") from None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DefectMap):
            return NotImplemented
        return (
            (self.model, self.params, self.seed, self.spec)
            == (other.model, other.params, other.seed, other.spec)
            and np.array_equal(self.dead_pe, other.dead_pe)
            and np.array_equal(self.dead_link, other.dead_link)
        )

    def __repr__(self) -> str:
        return (
            f"DefectMap(model={self.model!r}, seed={self.seed!r}, spec={self.spec.name!r}, "
            f"{self.width}x{self.height}, dead_pes={self.dead_pes}, "
            f"dead_links={self.dead_links})"
        )

    @property
    def width(self) -> int:
        return self.spec.physical_width_pes

    @property
    def height(self) -> int:
        return self.spec.physical_height_pes

    @property
    def dead_pes(self) -> int:
        return int(np.count_nonzero(self.dead_pe))

    @property
    def dead_links(self) -> int:
        """Dead wires, each counted once (edge wires to boundary ports included)."""
        links = self.dead_link
        east_south = np.count_nonzero(links[:, :, E]) + np.count_nonzero(links[:, :, S])
        west_north = np.count_nonzero(links[:, 0, W]) + np.count_nonzero(links[0, :, N])
        return int(east_south + west_north)

    @property
    def working_pes(self) -> int:
        return self.spec.physical_pes - self.dead_pes

    def save(self, path: str | Path) -> None:
        """Write the map to an HDF5 file, atomically."""
        attrs = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "model": self.model,
            "params": json.dumps(self.params, sort_keys=True),
            "seed": -1 if self.seed is None else int(self.seed),
            "spec": json.dumps(self.spec.to_dict(), sort_keys=True),
            "wafersim_version": wafer.__version__,
        }
        with atomic_hdf5(path) as f:
            f.create_dataset("dead_pe", data=self.dead_pe, compression="gzip")
            f.create_dataset("dead_link", data=self.dead_link, compression="gzip")
            f.attrs.update(attrs)

    @classmethod
    def load(cls, path: str | Path) -> DefectMap:
        """Read a map saved by :meth:`save`; anything else raises :class:`DefectMapError`."""
        path = Path(path)
        if path.is_dir():
            raise DefectMapError(f"{path} is a folder, not a defect map file (.h5)")
        if not path.is_file():
            raise DefectMapError(f"{path}: no such file")
        if not h5py.is_hdf5(path):
            raise DefectMapError(f"{path}: not an HDF5 file, so not a wafersim defect map")
        try:
            with h5py.File(path, "r") as f:
                return _read_map(f)
        except (DefectMapError, ConfigError, ValueError, KeyError, TypeError, OSError) as error:
            raise DefectMapError(f"{path}: not a valid wafersim defect map: {error}") from None


def _frozen_mask(name: str, mask: Any, shape: tuple[int, ...]) -> np.ndarray:
    """A read-only view of ``mask`` after checking it is a bool array of ``shape``."""
    if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_:
        got = mask.dtype if isinstance(mask, np.ndarray) else type(mask).__name__
        raise DefectMapError(f"{name} must be a numpy bool array, got {got}")
    if mask.shape != shape:
        raise DefectMapError(f"{name} has shape {mask.shape}; the spec needs {shape}")
    view = mask.view()
    view.setflags(write=False)
    return view


def _read_map(f: h5py.File) -> DefectMap:
    fmt = f.attrs.get("format")
    if fmt != FORMAT:
        raise DefectMapError(f"format attribute is {excerpt(fmt)}, expected {FORMAT!r}")
    version = f.attrs.get("format_version")
    version = version.item() if isinstance(version, np.generic) else version
    if version != FORMAT_VERSION:
        raise DefectMapError(f"format_version is {excerpt(version)}; this wafersim reads 1")
    seed = int(f.attrs["seed"])
    return DefectMap(
        dead_pe=_read_bool(f, "dead_pe"),
        dead_link=_read_bool(f, "dead_link"),
        model=str(f.attrs["model"]),
        params=json.loads(f.attrs["params"]),
        seed=None if seed < 0 else seed,
        spec=spec_from_dict(json.loads(f.attrs["spec"])),
    )


def _read_bool(f: h5py.File, name: str) -> np.ndarray:
    data = f.get(name)
    if not isinstance(data, h5py.Dataset):
        raise DefectMapError(f"missing dataset {name!r}")
    if data.dtype != np.bool_:
        raise DefectMapError(f"dataset {name!r} has dtype {data.dtype}, expected bool")
    return data[()]


# --- random models -----------------------------------------------------------------------

_RATE_PARAMS = ("pe_defect_prob", "defect_density_per_cm2")
# name -> (low, high, integer, low_open)
_PARAM_RANGES: dict[str, tuple[float, float, bool, bool]] = {
    "pe_defect_prob": (0.0, 1.0, False, False),
    # defects per cm^2: published wafers see 0.1-10; at 1e4 a WSE-2 PE tile (0.05 mm^2) has
    # 5 expected defects (99 % dead), so more is a typo, not a study
    "defect_density_per_cm2": (0.0, 1e4, False, False),
    "link_defect_fraction": (0.0, 1.0, False, False),
    "cluster_size_pes": (1, 1_000_000, True, False),
    "alpha": (0.0, math.inf, False, True),
}
_RANDOM_DEFAULTS: dict[str, dict[str, Any]] = {
    "poisson": {"link_defect_fraction": LINK_DEFECT_FRACTION},
    "clustered": {
        "link_defect_fraction": LINK_DEFECT_FRACTION,
        "cluster_size_pes": CLUSTER_SIZE_PES,
        "alpha": CLUSTER_ALPHA,
    },
}


def _check_names(model: str, params: dict[str, Any], allowed: set[str]) -> None:
    unknown = set(params) - allowed
    if unknown:
        raise ConfigError(
            f"unknown parameter(s) for defect model {excerpt(model)}: "
            f"{_listed(unknown)}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )


def _check_param(model: str, name: str, value: Any) -> float | int:
    """``value`` as a float (or int), after checking its type and range."""
    low, high, integer, low_open = _PARAM_RANGES[name]
    label = f"defect model {model!r} parameter {name}"
    noun = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ConfigError(f"{label} must be {noun}, got {excerpt(value)}")
    if not _finite(value):
        raise ConfigError(f"{label} must be finite, got {excerpt(value)}")
    if integer and not float(value).is_integer():
        raise ConfigError(f"{label} must be an integer, got {excerpt(value)}")
    if not (low < value if low_open else low <= value) or value > high:
        bounds = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high == math.inf else ']'}"
        raise ConfigError(f"{label}={excerpt(value)} is out of range {bounds}")
    return int(value) if integer else float(value)


def _listed(names: set) -> str:
    """``names`` sorted and joined as written, or their bounded excerpt when that is long: a
    file may hold thousands of unknown keys, or one of a megabyte."""
    text = ", ".join(sorted(map(str, names)))
    return text if len(text) <= EXCERPT_CHARS else excerpt(text)


def _finite(value: float | np.integer | np.floating) -> bool:
    """Whether ``value`` is a finite float: an integer too large for one is not."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _resolve_random(model: str, params: dict[str, Any]) -> dict[str, Any]:
    """The model's parameters with defaults filled in, each checked."""
    defaults = _RANDOM_DEFAULTS[model]
    _check_names(model, params, set(_RATE_PARAMS) | set(defaults))
    given = [name for name in _RATE_PARAMS if name in params]
    if len(given) != 1:
        raise ConfigError(
            f"defect model {model!r} needs exactly one of pe_defect_prob or "
            f"defect_density_per_cm2; got {' and '.join(given) if given else 'neither'}"
        )
    merged = {**defaults, **params}
    return {name: _check_param(model, name, value) for name, value in merged.items()}


def defects_per_tile(spec: WaferSpec, params: dict[str, Any]) -> float:
    """Expected defects per PE tile (lambda) for resolved random-model ``params``."""
    if "pe_defect_prob" in params:
        p = params["pe_defect_prob"]
        lam = math.inf if p >= 1.0 else -math.log1p(-p)
    else:
        lam = params["defect_density_per_cm2"] * spec.pe.area_mm2 / MM2_PER_CM2
    return min(lam, MAX_DEFECTS_PER_TILE)


def defect_free_probability(spec: WaferSpec, model: str, params: dict[str, Any]) -> float:
    """The chance that ``model`` draws a wafer of ``spec`` with no defect at all (what a part
    that needs every PE and wire would yield): Poisson ``exp(-lambda * tiles)``; clustered,
    each block of ``cluster_size_pes`` squared tiles negative binomial. An explicit map is
    one wafer: 1 if it lists no defect, else 0."""
    if model == "explicit":
        return float(not generate(spec, model, 0, **params).dead_pe.any())
    resolved = _resolve_random(model, params)
    lam, height, width = (
        defects_per_tile(spec, resolved),
        spec.physical_height_pes,
        spec.physical_width_pes,
    )
    if model == "poisson":
        return math.exp(-lam * height * width)
    size, alpha = resolved["cluster_size_pes"], resolved["alpha"]  # edge blocks are smaller
    blocks = _block_sizes(height, size)[:, None] * _block_sizes(width, size)[None, :]
    return float(np.exp(-alpha * np.log1p(lam * blocks / alpha).sum()))


def _block_sizes(length: int, size: int) -> np.ndarray:
    """Tiles of each block along a side of ``length`` tiles cut into blocks of ``size``."""
    return np.diff(np.minimum(np.arange(0, length + size, size), length))[: ceil_div(length, size)]


def defect_rng(seed: int) -> np.random.Generator:
    """The defect stream of ``seed``: the first child of its ``SeedSequence``."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {excerpt(seed)}")
    if seed > MAX_SEED:  # a map's seed is saved as an int64 attribute
        raise ConfigError(f"seed={excerpt(seed)} is out of range [0, 2**63 - 1]")
    children = np.random.SeedSequence(int(seed)).spawn(NUM_STREAMS)
    return np.random.default_rng(children[DEFECT_STREAM])


def _poisson_hits(
    rng: np.random.Generator, lam: float, shape: tuple[int, int], params: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    """Poisson(lambda) defects on every tile. Up to :data:`SPARSE_LAMBDA` the wafer's total
    is drawn, Poisson(lambda * tiles), and each defect lands on a uniform tile: the same
    distribution (a Poisson process split evenly), in time that grows with the defects, not
    the tiles (a wse2 map at 1/cm^2: 0.3 ms instead of 9 ms)."""
    tiles = shape[0] * shape[1]
    if lam > SPARSE_LAMBDA:
        return _nonzero_tiles(rng.poisson(lam, size=tiles))
    positions = rng.integers(0, tiles, size=rng.poisson(lam * tiles), dtype=np.int64)
    return np.unique(positions, return_counts=True)


def _clustered_hits(
    rng: np.random.Generator, lam: float, shape: tuple[int, int], params: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    size, alpha = params["cluster_size_pes"], params["alpha"]
    height, width = shape
    blocks = (ceil_div(height, size), ceil_div(width, size))
    multiplier = rng.gamma(alpha, 1.0 / alpha, size=blocks)
    rows, cols = np.arange(height) // size, np.arange(width) // size  # each tile's block
    per_tile = multiplier[rows[:, None], cols[None, :]]  # (a cluster wider than the wafer
    # once made a size x size array first: 74.5 GiB for cluster_size_pes=100000)
    return _nonzero_tiles(rng.poisson(np.minimum(lam * per_tile, MAX_DEFECTS_PER_TILE)))


def _nonzero_tiles(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    hit = np.flatnonzero(counts)
    return hit, counts.ravel()[hit]


# model -> (flat ids of the tiles with defects, ascending; their defect counts)
_HIT_MODELS: dict[str, Callable[..., tuple[np.ndarray, np.ndarray]]] = {
    "poisson": _poisson_hits,
    "clustered": _clustered_hits,
}


def _draw_hits(
    spec: WaferSpec, model: str, seed: int, params: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray, np.random.Generator, dict[str, Any]]:
    """Tiles with defects, their counts, the generator (to go on drawing from) and the
    resolved params."""
    resolved = _resolve_random(model, params)
    rng = defect_rng(seed)
    shape = (spec.physical_height_pes, spec.physical_width_pes)
    hit, counts = _HIT_MODELS[model](rng, defects_per_tile(spec, resolved), shape, resolved)
    return hit, counts, rng, resolved


def _place_defects(
    rng: np.random.Generator,
    hit: np.ndarray,
    counts: np.ndarray,
    shape: tuple[int, int],
    link_fraction: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Split each hit tile's defects into PE kills and east/south wire cuts; a cut wire is
    marked at both its ends (at the wafer's edge, at its boundary port only)."""
    height, width = shape
    pe_hits = rng.binomial(counts, 1.0 - link_fraction)
    wire_hits = counts - pe_hits
    east_hits = rng.binomial(wire_hits, 0.5)
    dead_pe = np.zeros(height * width, dtype=np.bool_)
    dead_pe[hit[pe_hits > 0]] = True
    dead_link = np.zeros((height * width, NUM_DIRS), dtype=np.bool_)
    east, south = hit[east_hits > 0], hit[wire_hits - east_hits > 0]
    dead_link[east, E] = True
    dead_link[east[east % width < width - 1] + 1, W] = True
    dead_link[south, S] = True
    dead_link[south[south < (height - 1) * width] + width, N] = True
    return dead_pe.reshape(height, width), dead_link.reshape(height, width, NUM_DIRS)


def _random_map(model: str, spec: WaferSpec, seed: int, params: dict[str, Any]) -> DefectMap:
    hit, counts, rng, resolved = _draw_hits(spec, model, seed, params)
    shape = (spec.physical_height_pes, spec.physical_width_pes)
    dead_pe, dead_link = _place_defects(rng, hit, counts, shape, resolved["link_defect_fraction"])
    return DefectMap(dead_pe, dead_link, model, resolved, int(seed), spec)


def tile_defect_counts(
    spec: WaferSpec, model: str = "poisson", seed: int = 0, **params: Any
) -> np.ndarray:
    """``(height, width)`` int64: the defects :func:`generate` places on each tile."""
    if model not in _HIT_MODELS:
        raise ConfigError(
            f"unknown random defect model {excerpt(model)}; valid models: {', '.join(_HIT_MODELS)}"
        )
    hit, counts, _rng, _resolved = _draw_hits(spec, model, seed, params)
    tiles = np.zeros(spec.physical_pes, dtype=np.int64)
    tiles[hit] = counts
    return tiles.reshape(spec.physical_height_pes, spec.physical_width_pes)


# --- explicit model ----------------------------------------------------------------------

_EXPLICIT_SUFFIXES = (".toml", ".yaml", ".yml", ".json")
_EXPLICIT_KEYS = {"dead_pes", "dead_links"}


def _explicit_map(spec: WaferSpec, seed: int | None, params: dict[str, Any]) -> DefectMap:
    """The dead PEs and wires listed in the file ``params["path"]``; ``seed`` is ignored."""
    _check_names("explicit", params, {"path"})
    if "path" not in params:
        raise ConfigError(
            "defect model 'explicit' needs parameter path: a .toml, .yaml or .json file "
            "listing dead_pes and dead_links"
        )
    if not isinstance(params["path"], (str, Path)):
        raise ConfigError(
            f"defect model 'explicit' parameter path must be text, got {excerpt(params['path'])}"
        )
    path = Path(params["path"])
    data = _read_defect_list(path)
    shape = (spec.physical_height_pes, spec.physical_width_pes)
    dead_pe = np.zeros(shape, dtype=np.bool_)
    for i, entry in enumerate(_entries(path, data, "dead_pes")):
        x, y = _grid_xy(path, f"dead_pes[{i}]", entry, 2, shape)
        dead_pe[y, x] = True
    dead_link = np.zeros((*shape, NUM_DIRS), dtype=np.bool_)
    for i, entry in enumerate(_entries(path, data, "dead_links")):
        x, y = _grid_xy(path, f"dead_links[{i}]", entry, 3, shape)
        dead_link[y, x, _direction(path, f"dead_links[{i}]", entry)] = True
    return DefectMap(dead_pe, mirror_links(dead_link), "explicit", {"path": str(path)}, None, spec)


def _read_defect_list(path: Path) -> dict[str, Any]:
    if not exists(path):
        raise DefectMapError(f"{excerpt(str(path))}: no such file")
    if path.suffix.lower() not in _EXPLICIT_SUFFIXES:
        raise DefectMapError(
            f"{path}: unknown file type {excerpt(path.suffix)}; use {', '.join(_EXPLICIT_SUFFIXES)}"
        )
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(path.read_text())
        else:
            data = load_mapping(path)
    except ConfigError as error:
        raise DefectMapError(str(error)) from None
    except RecursionError:
        raise DefectMapError(f"{path}: cannot parse: nested too deeply") from None
    except json.JSONDecodeError as error:
        where = f"{error.lineno}:{error.colno}"
        raise DefectMapError(f"{path}:{where}: cannot parse: {error.msg}") from None
    except ValueError as error:  # UnicodeDecodeError
        raise DefectMapError(f"{path}: cannot parse: {error}") from None
    if not isinstance(data, dict):
        raise DefectMapError(f"{path}: expected a table with keys dead_pes and dead_links")
    unknown = set(data) - _EXPLICIT_KEYS
    if unknown:
        raise DefectMapError(
            f"{path}: unknown key(s) {_listed(unknown)}; allowed: dead_links, dead_pes"
        )
    return data


def _entries(path: Path, data: dict[str, Any], key: str) -> list[Any]:
    entries = data.get(key, [])
    if not isinstance(entries, list):
        raise DefectMapError(f"{path}: {key} must be a list, got {excerpt(entries)}")
    return entries


def _grid_xy(
    path: Path, label: str, entry: Any, length: int, shape: tuple[int, int]
) -> tuple[int, int]:
    """``(x, y)`` of an entry ``[x, y]`` or ``[x, y, "E"]``, checked against the grid."""
    form = "[x, y]" if length == 2 else '[x, y, "N|E|S|W"]'
    if not isinstance(entry, (list, tuple)) or len(entry) != length:
        raise DefectMapError(f"{path}: {label} = {excerpt(entry)} must look like {form}")
    height, width = shape
    for name, value, limit in (("x", entry[0], width), ("y", entry[1], height)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise DefectMapError(f"{path}: {label} = {excerpt(entry)}: {name} must be an integer")
        if not 0 <= value < limit:
            raise DefectMapError(
                f"{path}: {label} = {excerpt(entry)}: {name}={excerpt(value)} is outside the "
                "physical grid "
                f"(0 <= {name} < {limit})"
            )
    return entry[0], entry[1]


def _direction(path: Path, label: str, entry: Any) -> int:
    name = entry[2]
    if isinstance(name, str) and name.upper() in ("N", "E", "S", "W"):
        return direction_index(name)
    raise DefectMapError(f"{path}: {label} = {excerpt(entry)}: direction must be one of N, E, S, W")


# --- registry ----------------------------------------------------------------------------

DEFECT_MODELS: dict[str, Callable[[WaferSpec, Any, dict[str, Any]], DefectMap]] = {
    "poisson": partial(_random_map, "poisson"),
    "clustered": partial(_random_map, "clustered"),
    "explicit": _explicit_map,
}
"""Defect models by name; each takes ``(spec, seed, params)`` and returns a DefectMap."""


def generate(spec: WaferSpec, model: str = "poisson", seed: int = 0, **params: Any) -> DefectMap:
    """The defect map that ``model`` with ``params`` draws for ``spec`` from ``seed``."""
    try:
        make = DEFECT_MODELS[model]
    except (KeyError, TypeError):
        raise ConfigError(
            f"unknown defect model {excerpt(model)}; valid models: {', '.join(DEFECT_MODELS)}"
        ) from None
    return make(spec, seed, params)
