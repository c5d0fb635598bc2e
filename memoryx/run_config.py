"""The config of ``wafersim run``: one YAML/TOML table, checked key by key at the door.

Top-level keys (all but ``model`` optional)::

    model: models/fc-digits.yaml      # a model file, relative to the config file
    wafer: {preset: tiny, overrides: {...}, defects: {model: poisson, seed: 1,
            repair: column_shift, pe_defect_prob: 0.01}}
    data: {name: digits}              # see memoryx.data
    input: {workers: 8}               # the input pipeline model, see memoryx.data
    batch: 64                         # sequences (or samples) per step and wafer
    seq: null                         # tokens per sequence (default: the model's context)
    dtype: fp32
    optimizer: {name: adamw, lr: 0.001}
    steps: 100
    tier: cycle                       # cycle: GEMMs run on the cycle engine; fast: GEMM
                                      # cycles from small engine runs (kernels.fast_tier);
                                      # analytic: the compiler's estimates
    seed: 0                           # weights, data order
    init_std: 0.02                    # weights start as N(0, init_std**2) (GPT-2's 0.02)
    checkpoint_every: 50
    eval_every: 50
    keep_checkpoints: 2               # the newest checkpoints kept in DIR/checkpoints
    memoryx: {tile_bytes: 4194304, prefetch_buffer_bytes: null}
    swarmx: {wafers: 1, defect_seed_stride: 1}   # data-parallel wafers, each its own defects
    sparsity: {density: 0.25}         # or {threshold: 0.05}: see memoryx.sparsity
    strategies: null                  # GEMM strategies to search (default: all)
    activations: auto                 # kept for backward: auto, keep, recompute or ignore
    micro_batches: null               # the batch split in parts (default: the fewest that fit)

The loader (:func:`load_run_config`, :func:`run_config`) checks every key once and reads it
into a typed value: :class:`RunConfig`'s attributes (``config.batch``, ``config.swarmx.wafers``,
``config.wafer.defects.seed``), with a record per table (:class:`WaferSection`,
:class:`DefectsSection`, :class:`MemoryXSection`, :class:`SwarmXSection`,
:class:`SparsityRule`, the optimizer's and the input pipeline's own records). Tables stay
tables only at the edges: ``RunConfig.raw`` (what outputs echo and the digests cover), the
data set's table (:mod:`memoryx.data` checks it against its files when the run starts) and a
defect model's parameters.

``key=value`` overrides use dotted keys (``optimizer.lr=0.01``, ``wafer.defects.seed=3``).
A run on a folder that holds checkpoints resumes from the newest; of its config, only the keys in
:data:`CONTINUABLE` may differ from the run that wrote them (``steps=40`` trains a 20-step run
on).

Every path a config names (``model``, ``data.path``, ``wafer.defects.path``) is read relative
to the config file's folder when it is relative, whatever the working directory; the checked
config holds them absolute (:data:`PATH_KEYS`, :func:`config_path`).

A config's digests (:attr:`RunConfig.digest`, :attr:`RunConfig.run_digest`) cover the bytes of
every file it names (:func:`named_files`): the model, an explicit defect list
(``wafer.defects.path``) and a data set's files (``data.path``). Data files are hashed whole:
the run reads them whole anyway, and hashing costs less than that read.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wafersim.compiler import activations
from wafersim.compiler.model_file import MAX_SIZE
from wafersim.compiler.strategies import strategies
from wafersim.fabric.program import DTYPES
from wafersim.kernels.tiers import TIERS
from wafersim.memoryx.data import MNIST_FILES, InputPipeline, input_pipeline
from wafersim.memoryx.optimizer import Optimizer, make_optimizer
from wafersim.memoryx.sparsity import check_sparsity
from wafersim.memoryx.store import check_init_std
from wafersim.memoryx.swarmx import MAX_WAFERS
from wafersim.wafer.atomic import atomic_path, write_json
from wafersim.wafer.config_io import flatten, load_mapping
from wafersim.wafer.dtypes import DTYPE_NAMES, DType
from wafersim.wafer.errors import EXCERPT_CHARS, ConfigError, excerpt
from wafersim.wafer.presets import DEFAULT_PRESET, PRESETS, preset
from wafersim.wafer.repair import DEFAULT_REPAIR
from wafersim.wafer.spec import WaferSpec

DEFAULTS: dict[str, Any] = {
    "wafer": {"preset": DEFAULT_PRESET},
    "data": {"name": "digits"},
    "input": {},
    "batch": 32,
    "seq": None,
    "dtype": "fp32",
    "optimizer": {"name": "adamw"},
    "steps": 10,
    "tier": "cycle",
    "seed": 0,
    "init_std": 0.02,
    "checkpoint_every": 0,
    "eval_every": 0,
    "keep_checkpoints": 2,
    "memoryx": {},
    "swarmx": {},
    "sparsity": None,
    "strategies": None,
    "activations": "auto",
    "micro_batches": None,
}
WAFER_KEYS = ("preset", "overrides", "defects")
DEFECT_KEYS = ("model", "seed", "repair")  # plus the defect model's own parameters
DEFAULT_DEFECT_MODEL = "poisson"  # wafer.defects without a model
MEMORYX_KEYS = ("tile_bytes", "prefetch_buffer_bytes")
SWARMX_KEYS = ("wafers", "defect_seed_stride")
SECTION_RANGES = {  # memoryx and swarmx keys: integers (memoryx ones may be null: default)
    "tile_bytes": (1, 2**40),
    "prefetch_buffer_bytes": (1, 2**50),
    "wafers": (1, MAX_WAFERS),
    "defect_seed_stride": (0, 2**31),
}
INT_RANGES = {
    "batch": (1, 10**9),
    "steps": (1, 10**9),
    "seed": (0, 2**63 - 1),
    "checkpoint_every": (0, 10**9),
    "eval_every": (0, 10**9),
    "keep_checkpoints": (1, 10**6),
}
# Integers that may be null (a default): the model's context bounds seq when the run
# compiles; this range holds whatever the model
NULLABLE_RANGES = {"seq": (1, MAX_SIZE)}
# The keys that name a file or folder, by their tables: read relative to the config's folder
DATA_PATH, DEFECTS_PATH = ("data", "path"), ("wafer", "defects", "path")
PATH_KEYS = (DATA_PATH, DEFECTS_PATH)
INT64 = (-(2**63), 2**63 - 1)  # a spec override's integers: spec values are kept as int64
HASH_MEMO_MIN_BYTES = 2**20  # larger files' digests are remembered by size and times
# Keys a resumed run may change: how long it trains and how often it evaluates and saves, not
# what it trains (the model, data, batch, optimizer, wafer: the rest of the config)
CONTINUABLE = ("steps", "eval_every", "checkpoint_every", "keep_checkpoints")


@dataclass(frozen=True)
class DefectsSection:
    """``wafer.defects``: the defect model that draws each wafer's map, its seed (wafer
    ``i`` draws from ``seed + i * swarmx.defect_seed_stride``), the repair strategy, and the
    model's own parameters as written (``pe_defect_prob``, ``path``, ...: the model checks
    them when it draws)."""

    model: str
    seed: int
    repair: str
    params: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The section as a table, its defaults filled in (the model's parameters last)."""
        return {"model": self.model, "seed": self.seed, "repair": self.repair, **self.params}


@dataclass(frozen=True)
class WaferSection:
    """``wafer``: the preset, the spec overrides (flat, dotted keys) and the defects (None:
    defect-free wafers); the spec they make is :attr:`RunConfig.spec`."""

    preset: str
    overrides: dict[str, Any]
    defects: DefectsSection | None


@dataclass(frozen=True)
class MemoryXSection:
    """``memoryx``: the stream's tile and the wafer's prefetch buffer (None: the defaults
    :func:`memoryx.run.stream_edge` derives from the plan)."""

    tile_bytes: int | None = None
    prefetch_buffer_bytes: int | None = None


@dataclass(frozen=True)
class SwarmXSection:
    """``swarmx``: the data-parallel wafers and the step between their defect seeds."""

    wafers: int = 1
    defect_seed_stride: int = 1


@dataclass(frozen=True)
class SparsityRule:
    """``sparsity``: prune by ``density`` (the share of weights kept) or by ``threshold``
    (the magnitude kept), as :func:`memoryx.sparsity.check_sparsity` reads it."""

    kind: str  # "density" or "threshold"
    value: float

    def to_dict(self) -> dict[str, float]:
        """The section as :mod:`memoryx.sparsity` takes it."""
        return {self.kind: self.value}


@dataclass(frozen=True)
class RunConfig:
    """A checked run config: its sections as typed values, read by attribute; ``raw`` is
    the resolved table as written (defaults filled in, paths absolute), which goes into
    every output and the digests."""

    raw: dict[str, Any]
    model_path: Path
    spec: WaferSpec
    wafer: WaferSection
    data: dict[str, Any]  # memoryx.data's table: its kinds check their keys and files
    input: InputPipeline
    batch: int
    seq: int | None  # None: the model's context
    dtype: DType
    optimizer: Optimizer
    steps: int
    tier: str
    seed: int
    init_std: float
    checkpoint_every: int
    eval_every: int
    keep_checkpoints: int
    memoryx: MemoryXSection
    swarmx: SwarmXSection
    sparsity: SparsityRule | None
    strategies: tuple[str, ...] | None  # None: search every strategy
    activations: str
    micro_batches: int | None  # None: the fewest that fit
    files: tuple[Path, ...] = ()  # every file it names (:func:`named_files`)

    @property
    def training(self) -> dict[str, Any]:
        """The config but the :data:`CONTINUABLE` keys: what a checkpoint's training is."""
        return {key: value for key, value in self.raw.items() if key not in CONTINUABLE}

    @property
    def digest(self) -> str:
        """SHA-256 of :attr:`training` and the files it names: which training a checkpoint
        belongs to, whatever its steps."""
        return _sha256(self.training, self.model_path, self.files)

    @property
    def run_digest(self) -> str:
        """SHA-256 of the whole config and the files it names: which run a default output
        folder is of (points of a sweep over steps each get their own; to train a run on,
        name its folder with --out)."""
        return _sha256(self.raw, self.model_path, self.files)


def _sha256(table: dict[str, Any], model_path: Path, files: tuple[Path, ...]) -> str:
    """The model is read as text and the other files go in by their digests, so a config
    that names only a model keeps the digest its checkpoints were saved with."""
    text = json.dumps(table, sort_keys=True) + model_path.read_text()
    text += "".join(f"\n{path.name}:{file_sha256(path)}" for path in files if path != model_path)
    return hashlib.sha256(text.encode()).hexdigest()


def named_files(data: dict[str, Any], base_dir: Path) -> tuple[Path, ...]:
    """Every existing file the config table ``data`` names, as the run reads them (relative
    paths from ``base_dir``, :func:`config_path`): the model, an explicit defect list and the
    data set's files. Unchecked values are skipped, not refused: the run refuses them."""
    folder = config_path(_lookup(data, DATA_PATH), base_dir)
    defects = config_path(_lookup(data, DEFECTS_PATH), base_dir)
    names = [config_path(data.get("model"), base_dir), defects]
    if folder is not None:  # each IDX file plain and gzipped: the loader takes either
        names += [folder / f"{stem}{gz}" for stem in MNIST_FILES.values() for gz in ("", ".gz")]
    return tuple(path.resolve() for path in names if path is not None and _is_file(path))


def config_path(value: Any, base_dir: Path) -> Path | None:
    """A path the config names: absolute as given, relative from ``base_dir`` (the config
    file's folder), so that a run reads the same files from any working directory; None for
    a value that is not text."""
    if not isinstance(value, str) or not value:
        return None
    path = Path(value)
    return path if path.is_absolute() else base_dir / path


def _resolve_paths(raw: dict[str, Any], base_dir: Path) -> None:
    """Make the :data:`PATH_KEYS` in ``raw`` absolute, the one place the run reads them from."""
    for *tables, key in PATH_KEYS:
        table = _lookup(raw, tuple(tables))
        value = table.get(key) if isinstance(table, dict) else None
        path = config_path(value, base_dir)
        if path is not None and isinstance(value, str) and not Path(value).is_absolute():
            table[key] = str(_absolute(path, ".".join((*tables, key))))


def _absolute(path: Path, field: str) -> Path:
    try:
        return path.resolve()
    except OSError as error:  # a name too long, a loop of links
        raise ConfigError(f"{field}={excerpt(str(path))}: {error.strerror or error}") from None


def _lookup(data: Any, keys: tuple[str, ...]) -> Any:
    """``data[k0][k1]...``, or None where a table is missing or not a table."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long: no such file
        return False


def config_files(path: str | Path, overrides: dict[str, Any]) -> tuple[Path, ...]:
    """The run config at ``path`` and the files it names with dotted ``overrides`` set, read
    without the checks of a run (a sweep point that fails them fails when it runs)."""
    path = Path(path).resolve()
    try:
        data = load_mapping(path)
        for key, value in overrides.items():
            _set(data, key, value)
    except ConfigError:
        return (path,)
    return (path, *named_files(data, path.parent))


def file_sha256(path: Path) -> str:
    """SHA-256 of the bytes of ``path``; a large file's is remembered by path, size, inode
    and change times, as the points of a sweep name one data set over and over. A file that
    cannot be read is a ConfigError naming it."""
    try:
        stat = path.stat()
        if stat.st_size < HASH_MEMO_MIN_BYTES:
            return _hash_file(path)
        return _remembered_sha256(path, stat.st_size, stat.st_ino, stat.st_mtime_ns,
                                  stat.st_ctime_ns)  # fmt: skip
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None


@functools.lru_cache(maxsize=256)
def _remembered_sha256(path: Path, *stat: int) -> str:
    return _hash_file(path)


def _hash_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def load_run_config(path: str | Path, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Read ``path``, apply dotted ``overrides`` and check every key."""
    path = Path(path)
    data = load_mapping(path)
    for key, value in (overrides or {}).items():
        _set(data, key, value)
    return run_config(data, path.parent)


def run_config(data: dict[str, Any], base_dir: Path) -> RunConfig:
    """Check ``data`` (paths relative to ``base_dir``), fill in the defaults and read every
    section into its typed record: each key is checked here, once, in the order below."""
    _check_top_keys(data)
    raw = copy.deepcopy(DEFAULTS) | copy.deepcopy(data)
    model_path = _model_path(raw["model"], base_dir)
    raw["model"] = str(model_path)
    _resolve_paths(raw, base_dir)
    _check_ints(raw)
    sections = _sections(raw)
    wafer = wafer_section(raw["wafer"])
    return RunConfig(
        raw=raw,
        model_path=model_path,
        spec=_spec(wafer),
        wafer=wafer,
        data=raw["data"],
        **{key: raw[key] for key in (*INT_RANGES, *NULLABLE_RANGES)},
        **sections,
        init_std=check_init_std(raw["init_std"]),
        files=named_files(raw, base_dir),
    )


def _sections(raw: dict[str, Any]) -> dict[str, Any]:
    """The typed values of ``raw`` but the integers, the wafer and the data set, by field
    name of :class:`RunConfig`."""
    tier = _choice("tier", raw["tier"], TIERS)
    dtype = _dtype(raw["dtype"])
    memoryx = MemoryXSection(**_int_section("memoryx", raw["memoryx"], MEMORYX_KEYS))
    swarmx = SwarmXSection(**_int_section("swarmx", raw["swarmx"], SWARMX_KEYS))
    optimizer = _optimizer(raw["optimizer"])
    strategies = _strategies(raw["strategies"])
    rule = check_sparsity(raw["sparsity"])
    activations.check_options(raw["activations"], raw["micro_batches"])
    return {
        "tier": tier,
        "dtype": dtype,
        "memoryx": memoryx,
        "swarmx": swarmx,
        "optimizer": optimizer,
        "strategies": strategies,
        "sparsity": None if rule is None else SparsityRule(*rule),
        "activations": raw["activations"],
        "micro_batches": raw["micro_batches"],
        "input": input_pipeline(raw["input"]),  # a typo here fails now, not after the run
    }


def _int_section(name: str, value: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    """The ``memoryx`` or ``swarmx`` table's integers, each in its :data:`SECTION_RANGES`
    (``memoryx`` ones may be null: the default), as keyword arguments of its record."""
    _check_section(name, value, keys)
    for key, number in value.items():
        _check_int(f"{name}.{key}", number, *SECTION_RANGES[key], none_ok=name == "memoryx")
    return dict(value)


def _check_top_keys(data: dict[str, Any]) -> None:
    unknown = sorted(str(key) for key in set(data) - set(DEFAULTS) - {"model"})
    if unknown:
        allowed = ", ".join(["model", *DEFAULTS])
        raise ConfigError(
            f"unknown key(s) in the run config: {_listed(unknown)}; allowed: {allowed}"
        )
    if "model" not in data:
        raise ConfigError("the run config needs a 'model' key: the path of a model file")


def _model_path(model: Any, base_dir: Path) -> Path:
    """The model file, from ``base_dir`` when relative; ConfigError when there is none."""
    path = _absolute(config_path(model, base_dir) or base_dir / str(model), "model")
    if not _is_file(path):
        raise ConfigError(f"model={excerpt(model)}: no such file {excerpt(str(path))}")
    return path


def _dtype(value: Any) -> DType:
    """``dtype``, checked: its name as :data:`wafer.dtypes.DTYPE_NAMES` spells it (a
    :data:`~wafer.dtypes.DType` from here on)."""
    _choice("dtype", value, DTYPES)
    return next(name for name in DTYPE_NAMES if name == value)


def _choice(key: str, value: Any, allowed) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ConfigError(f"{key}={excerpt(value)} is not one of: {', '.join(allowed)}")
    return value


def _listed(names: list[str]) -> str:
    """``names`` joined as written, or their bounded excerpt when that is long: a file may
    hold thousands of unknown keys, or one of a megabyte."""
    text = ", ".join(names)
    return text if len(text) <= EXCERPT_CHARS else excerpt(text)


def _optimizer(section: Any) -> Optimizer:
    """The optimizer, built here so that a bad table is refused at load: its keys become
    keyword arguments, which must be text."""
    if not isinstance(section, dict) or "name" not in section or not all(map(_is_text, section)):
        raise ConfigError(
            f"optimizer must be a table with a 'name' and text keys, got {excerpt(section)}"
        )
    return make_optimizer(**section)


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _strategies(names: Any) -> tuple[str, ...] | None:
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"strategies={excerpt(names)} must be a list of strategy names or null")
    strategies(names)  # an unknown name lists the valid ones
    return tuple(names)


def wafer_spec(wafer: Any) -> WaferSpec:
    """The spec named by the ``wafer`` section (a preset plus overrides)."""
    return _spec(wafer_section(wafer))


def _spec(wafer: WaferSection) -> WaferSpec:
    base = preset(wafer.preset)
    return base.replace(wafer.overrides) if wafer.overrides else base


def wafer_section(wafer: Any) -> WaferSection:
    """The ``wafer`` section checked: its keys, the preset, the defects and the overrides
    (flattened: ``{pe: {x: 1}}`` is ``pe.x`` only)."""
    _check_section("wafer", wafer, WAFER_KEYS)
    name = _choice("wafer.preset", wafer.get("preset", DEFAULT_PRESET), PRESETS)
    defects = _defects(wafer.get("defects"))
    overrides = wafer.get("overrides") or {}
    if not isinstance(overrides, dict):
        raise ConfigError(f"wafer.overrides must be a table of spec keys, got {excerpt(overrides)}")
    flat = flatten(overrides)
    for key, value in flat.items():
        if isinstance(value, int) and not INT64[0] <= value <= INT64[1]:
            raise ConfigError(
                f"wafer.overrides.{_listed([key])}={excerpt(value)} is out of range "
                "[-2^63, 2^63 - 1]"
            )
    return WaferSection(name, flat, defects)


def _defects(defects: Any) -> DefectsSection | None:
    """``wafer.defects`` (None when absent or empty: defect-free wafers)."""
    _check_defects(defects)
    if not defects:
        return None
    params = {key: value for key, value in defects.items() if key not in DEFECT_KEYS}
    return DefectsSection(defects.get("model", DEFAULT_DEFECT_MODEL), defects.get("seed", 0),
                          defects.get("repair", DEFAULT_REPAIR), params)  # fmt: skip


def _check_defects(defects: Any) -> None:
    if defects is not None and not isinstance(defects, dict):
        raise ConfigError(
            f"wafer.defects must be a table (model, seed, repair and the model's parameters) "
            f"or null, got {excerpt(defects)}"
        )
    if defects:
        if not all(map(_is_text, defects)):
            raise ConfigError(f"wafer.defects keys must be text, got {excerpt(list(defects))}")
        _check_int("wafer.defects.seed", defects.get("seed", 0), 0, 2**63 - 1)


def _check_section(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if not isinstance(value, dict):
        raise ConfigError(f"{name} must be a table of keys, got {excerpt(value)}")
    unknown = sorted(str(key) for key in set(value) - set(allowed))
    if unknown:
        raise ConfigError(
            f"unknown key(s) in {name}: {_listed(unknown)}; allowed: {', '.join(allowed)}"
        )


def _check_ints(raw: dict[str, Any]) -> None:
    for key, (low, high) in INT_RANGES.items():
        _check_int(key, raw[key], low, high)
    for key, (low, high) in NULLABLE_RANGES.items():
        _check_int(key, raw[key], low, high, none_ok=True)


def _check_int(key: str, value: Any, low: int, high: int, none_ok: bool = False) -> None:
    if none_ok and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{key}={excerpt(value)} must be an integer in [{low}, {high}]")


def _set(tree: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.c`` in nested tables, creating the tables on the way."""
    *parents, last = dotted.split(".")
    node = tree
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override {excerpt(dotted)}: {excerpt(part)} is not a table")
        node = child
    node[last] = value


def write_config(config: RunConfig, out_dir: Path) -> Path:
    """The run's resolved config: ``run.yaml`` (the yaml extra), else ``run.json``."""
    try:
        import yaml
    except ImportError:
        path = out_dir / "run.json"
        write_json(path, config.raw)
        return path
    path = out_dir / "run.yaml"
    with atomic_path(path) as tmp:
        tmp.write_text(yaml.safe_dump(config.raw, sort_keys=False))
    return path
