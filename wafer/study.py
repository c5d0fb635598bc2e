"""Defect study: what defects and repair cost, per defect density and repair strategy.

For each defect density, each seed and each repair strategy, :func:`run_study` draws a
defect map of the whole preset, repairs it and measures the repaired logical grid:

* ``working_pes``, ``unrepaired_pes`` (holes) and ``unrepaired_links``;
* **route stretch**: every row multicast (color 0, from the row's first working PE) and
  every column multicast (color 1, likewise) of the *whole* logical grid is planned with
  :func:`fabric.reroute.plan_routes`; a route's stretch is its added hops (tree depth minus
  Manhattan distance, worst target), and the row holds their mean and max over routes.
  Routes are planned over the largest island of working PEs; working PEs cut off from it
  are counted in ``stranded_pes`` (a multicast cannot reach them at any stretch);
* **traffic**, on a ``window_pes x window_pes`` window of the repaired logical mesh, *not*
  the whole wafer (the cycle engine is too slow for it): the window centred on the logical
  grid, ``x0 = (width - k) // 2``, ``y0 = (height - k) // 2``, with its holes and dead links.
  Uniform random traffic (``PACKET_SIZE_FLITS``-flit packets) is routed ``xy`` on a window
  without faults and :data:`FAULT_ROUTING` on one with faults. Zero-load latency is the
  mean packet latency at ``ZERO_LOAD_FRACTION`` of the bisection bound ``4 / k`` flits per
  PE per cycle; saturation throughput is the largest accepted rate over offered rates of
  ``SWEEP_FRACTIONS`` of that bound, stopping at the first saturated one (flits per working
  PE per cycle, as :func:`fabric.traffic.run_traffic` reports them). It is also given
  relative to the defect-free window routed ``xy`` under the same traffic seed; the
  defect-free window's figures under both routings are kept (``StudyResult.baselines``),
  so a drop can be split into the cost of the faults and the cost of the routing switch.

A window the fabric cannot run (no fault-tolerant routing available, islands, a deadlock)
gets NaN traffic figures and a ``traffic_status`` code (:data:`TRAFFIC_STATUS`); the study
goes on. Seeds: one ``SeedSequence(seed)`` spawns one child per seed index, which gives that
index's defect-map seed and traffic seed; every density and strategy reuses them (common
random numbers, so strategies are compared on the same maps and the same traffic).

Aggregates per (density, strategy) are the mean over seeds of the finite samples and a
95 % confidence interval, ``mean +- t * s / sqrt(n)`` with Student's t for ``n - 1``
degrees of freedom (:data:`T_CRITICAL_95`).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import h5py
import numpy as np

import wafer
from fabric.mesh import Mesh
from fabric.plot import _pyplot
from fabric.reroute import islands, multicast_requests, plan_routes
from fabric.traffic import ROUTINGS, TrafficConfig, run_traffic
from wafer.atomic import atomic_path
from wafer.defects import DefectMap, generate
from wafer.errors import ConfigError, ConnectivityError, DeadlockError
from wafer.geometry import E, N, S, W
from wafer.presets import preset
from wafer.repair import REPAIR_STRATEGIES, repair
from wafer.spec import WaferSpec, spec_from_dict

log = logging.getLogger(__name__)

FORMAT = "wafersim-defect-study"
FORMAT_VERSION = 1
STUDY_MODELS = ("poisson", "clustered")  # random models a study can draw from
SEEDS_RANGE = (1, 1000)
WINDOW_PES_RANGE = (4, 64)  # up*/down* tables grow as (window_pes ** 2) ** 2
DEFAULT_WINDOW_PES = 16
DEFAULT_TRAFFIC_CYCLES = 3000
DEFAULT_TRAFFIC_WARMUP_CYCLES = 1000
MIN_TRAFFIC_CYCLES = 100
MAX_TRAFFIC_CYCLES = 1_000_000
CLEAN_ROUTING = "xy"  # windows without holes or dead links
FAULT_ROUTING = "updown"  # windows with holes or dead links (fabric/updown.py)
PACKET_SIZE_FLITS = 4
ZERO_LOAD_FRACTION = 0.02  # zero-load offered rate, as a share of the bisection bound
SWEEP_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)  # of the bound
UNIFORM_BOUND_NUMERATOR = 4.0  # uniform traffic on a k x k mesh saturates by 4/k [DT04]
# [DT04] W. J. Dally and B. Towles, "Principles and Practices of Interconnection Networks",
# Morgan Kaufmann 2004, ch. 3: under uniform traffic each bisection channel of a k x k mesh
# carries k * rate / 4 flits per cycle, so one flit per channel per cycle caps rate at 4 / k.
MARKERS = ("o", "s", "^", "v", "D")  # one per repair strategy in plots

T_CRITICAL_95 = (  # two-sided 95 % (0.975 quantile) of Student's t for df = 1..30 [NIST]
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
# [NIST] NIST/SEMATECH e-Handbook of Statistical Methods, sec. 1.3.6.7.2, "Critical Values
# of the Student's t Distribution" (column 0.975). Beyond df = 30 the normal value is used,
# which understates the interval by at most 4 % (t = 2.040 at df = 31).
Z_CRITICAL_95 = 1.96

TRAFFIC_STATUS = {
    "measured": 0,
    "no_fault_routing": 1,  # FAULT_ROUTING is not in fabric.traffic.ROUTINGS
    "disconnected": 2,  # the window's working PEs form several islands
    "deadlock": 3,
    "refused": 4,  # run_traffic refused the window (ConfigError)
}

ROW_COLUMNS: dict[str, str] = {  # column -> numpy dtype; one row per (density, strategy, seed)
    "defect_density_per_cm2": "f8",
    "strategy": "U16",
    "seed_index": "i8",
    "defect_seed": "i8",
    "traffic_seed": "i8",
    "dead_pes": "i8",
    "working_pes": "i8",
    "unrepaired_pes": "i8",
    "unrepaired_links": "i8",
    "stranded_pes": "i8",
    "routes": "i8",
    "mean_route_stretch_hops": "f8",
    "max_route_stretch_hops": "f8",
    "window_holes": "i8",
    "window_dead_links": "i8",
    "traffic_routing": "U16",
    "traffic_status": "i8",
    "zero_load_latency_cycles": "f8",
    "saturation_throughput_flits_per_pe_cycle": "f8",
    "relative_saturation_throughput": "f8",
}
METRICS = (  # the columns that get a mean and a confidence interval
    "dead_pes",
    "working_pes",
    "unrepaired_pes",
    "unrepaired_links",
    "stranded_pes",
    "mean_route_stretch_hops",
    "max_route_stretch_hops",
    "window_holes",
    "window_dead_links",
    "zero_load_latency_cycles",
    "saturation_throughput_flits_per_pe_cycle",
    "relative_saturation_throughput",
)


# --- configuration -----------------------------------------------------------------------


def _check_int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"{name}={value!r} must be an integer in [{low}, {high}]")
    if not low <= value <= high:
        raise ConfigError(f"{name}={value!r} is out of range [{low}, {high}]")
    return int(value)


def _check_densities(values: Any) -> tuple[float, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
        raise ConfigError(f"densities_per_cm2={values!r} must be a non-empty list of numbers")
    out = []
    for value in values:
        ok = not isinstance(value, bool) and isinstance(value, (int, float, np.number))
        if not ok or not math.isfinite(value) or value < 0:
            raise ConfigError(
                f"densities_per_cm2: {value!r} is not allowed; a density is a finite number "
                f">= 0 (defects per cm^2)"
            )
        out.append(float(value))
    if len(set(out)) != len(out):
        raise ConfigError(f"densities_per_cm2={out} lists a density twice")
    return tuple(out)


def _check_strategies(values: Any) -> tuple[str, ...]:
    allowed = ", ".join(REPAIR_STRATEGIES)
    if isinstance(values, str) or not isinstance(values, Sequence) or not values:
        raise ConfigError(f"strategies={values!r} must be a non-empty list of: {allowed}")
    for value in values:
        if value not in REPAIR_STRATEGIES:
            raise ConfigError(f"strategies: unknown repair strategy {value!r}; valid: {allowed}")
    if len(set(values)) != len(values):
        raise ConfigError(f"strategies={list(values)} lists a strategy twice")
    return tuple(values)


@dataclass(frozen=True)
class StudyConfig:
    """What a study sweeps and how it measures; every field is checked on construction."""

    densities_per_cm2: tuple[float, ...]
    strategies: tuple[str, ...] = tuple(REPAIR_STRATEGIES)
    seeds: int = 3  # samples per (density, strategy)
    seed: int = 0  # the one user seed every stream comes from
    model: str = "poisson"
    model_params: dict[str, Any] = field(default_factory=dict)  # e.g. alpha, cluster_size_pes
    window_pes: int = DEFAULT_WINDOW_PES
    traffic_cycles: int = DEFAULT_TRAFFIC_CYCLES
    traffic_warmup_cycles: int = DEFAULT_TRAFFIC_WARMUP_CYCLES

    __hash__ = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "densities_per_cm2", _check_densities(self.densities_per_cm2))
        set_(self, "strategies", _check_strategies(self.strategies))
        set_(self, "seeds", _check_int("seeds", self.seeds, *SEEDS_RANGE))
        set_(self, "seed", _check_int("seed", self.seed, 0, 2**63 - 1))
        set_(self, "window_pes", _check_int("window_pes", self.window_pes, *WINDOW_PES_RANGE))
        cycles = _check_int(
            "traffic_cycles", self.traffic_cycles, MIN_TRAFFIC_CYCLES, MAX_TRAFFIC_CYCLES
        )
        set_(self, "traffic_cycles", cycles)
        warmup = _check_int("traffic_warmup_cycles", self.traffic_warmup_cycles, 0, cycles // 2)
        set_(self, "traffic_warmup_cycles", warmup)
        if self.model not in STUDY_MODELS:
            raise ConfigError(f"model={self.model!r} is not one of: {', '.join(STUDY_MODELS)}")
        set_(self, "model_params", _check_model_params(self.model, self.model_params))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["densities_per_cm2"] = list(self.densities_per_cm2)
        out["strategies"] = list(self.strategies)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StudyConfig:
        return cls(**{**data, "densities_per_cm2": tuple(data["densities_per_cm2"])})


def _check_model_params(model: str, params: Any) -> dict[str, Any]:
    """``params`` after the defect model has checked their names and ranges on a tiny map."""
    if not isinstance(params, Mapping):
        raise ConfigError(f"model_params={params!r} must be a mapping of name -> value")
    params = dict(params)
    if "defect_density_per_cm2" in params or "pe_defect_prob" in params:
        raise ConfigError("model_params must not set the rate: the study sweeps densities")
    generate(preset("tiny"), model, 0, defect_density_per_cm2=0.0, **params)
    return params


# --- statistics --------------------------------------------------------------------------


def t_critical_95(df: int) -> float:
    """Two-sided 95 % critical value of Student's t with ``df`` degrees of freedom."""
    if df < 1:
        raise ConfigError(f"df={df} must be >= 1")
    return T_CRITICAL_95[df - 1] if df <= len(T_CRITICAL_95) else Z_CRITICAL_95


class MeanCI(NamedTuple):
    """Mean of ``n`` finite samples and the half-width of its 95 % confidence interval."""

    mean: float
    half_width: float  # NaN when n < 2
    n: int

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width


def mean_ci(samples: np.ndarray) -> MeanCI:
    """Mean and 95 % Student-t interval of the finite values of ``samples``."""
    values = np.asarray(samples, dtype=np.float64)
    values = values[np.isfinite(values)]
    n = int(values.size)
    if n == 0:
        return MeanCI(math.nan, math.nan, 0)
    mean = float(values.mean())
    if n == 1:
        return MeanCI(mean, math.nan, 1)
    half = t_critical_95(n - 1) * float(values.std(ddof=1)) / math.sqrt(n)
    return MeanCI(mean, half, n)


# --- one study point ---------------------------------------------------------------------


class Window(NamedTuple):
    """The traffic window: ``side x side`` logical PEs from logical ``(x0, y0)``."""

    x0: int
    y0: int
    side: int


def centred_window(spec: WaferSpec, side: int) -> Window:
    """The ``side x side`` window centred on ``spec``'s logical grid."""
    width, height = spec.logical_width_pes, spec.logical_height_pes
    if side > min(width, height):
        raise ConfigError(
            f"window_pes={side} does not fit the {width}x{height} logical grid of "
            f"{spec.name!r}; allowed: [{WINDOW_PES_RANGE[0]}, {min(width, height)}]"
        )
    return Window((width - side) // 2, (height - side) // 2, side)


class SampleSeeds(NamedTuple):
    defect_seed: int
    traffic_seed: int


def sample_seeds(seed: int, count: int) -> list[SampleSeeds]:
    """Per seed index a defect seed and a traffic seed, from ``SeedSequence(seed)``."""
    children = np.random.SeedSequence(seed).spawn(count)
    pairs = [child.generate_state(2, np.uint64) >> np.uint64(1) for child in children]
    return [SampleSeeds(int(a), int(b)) for a, b in pairs]


class StudyProgress(NamedTuple):
    """Passed to the progress callback after each study point."""

    done: int
    total: int
    elapsed_s: float


ProgressCallback = Callable[[StudyProgress], None]


# --- measurements ------------------------------------------------------------------------


def main_island(mesh: Mesh) -> tuple[Mesh, int]:
    """``mesh`` with every working PE outside its largest island made a hole, and how many
    working PEs that strands."""
    labels = islands(mesh)
    working = labels >= 0
    if not working.any():
        return mesh, 0
    sizes = np.bincount(labels[working])
    keep = labels == int(np.argmax(sizes))
    stranded = int(np.count_nonzero(working)) - int(sizes.max())
    return Mesh(mesh.width, mesh.height, keep, mesh.dead_link), stranded


def route_stretch(mesh: Mesh) -> dict[str, Any]:
    """Stranded PEs, routes, and mean and max added hops of every row and column multicast
    of ``mesh``'s largest island."""
    main, stranded = main_island(mesh)
    requests = multicast_requests(main)
    out: dict[str, Any] = {"stranded_pes": stranded, "routes": len(requests)}
    unmeasured = {"mean_route_stretch_hops": math.nan, "max_route_stretch_hops": math.nan}
    if not requests:
        return out | unmeasured
    try:
        plan = plan_routes(main, requests)
    except ConnectivityError as error:  # not expected on one island; a study goes on
        log.warning("route stretch not measured: %s", error)
        return out | unmeasured
    return out | {
        "mean_route_stretch_hops": float(plan.added_hops.mean()),
        "max_route_stretch_hops": float(plan.longest_detour),
    }


def window_mesh(mesh: Mesh, window: Window) -> Mesh:
    """The ``window`` of ``mesh`` as a mesh of its own; wires leaving it are dropped."""
    x0, y0, side = window
    cut = np.s_[y0 : y0 + side, x0 : x0 + side]
    alive = mesh.alive[cut].copy()
    dead = mesh.dead_link[cut].copy()
    dead[:, 0, W] = dead[:, -1, E] = False
    dead[0, :, N] = dead[-1, :, S] = False
    return Mesh(side, side, alive, dead)


def window_faults(mesh: Mesh) -> tuple[int, int]:
    """Holes and dead wires (each counted once) inside ``mesh``."""
    dead = mesh.dead_link
    wires = np.count_nonzero(dead[:, :-1, E]) + np.count_nonzero(dead[:-1, :, S])
    return int(np.count_nonzero(~mesh.alive)), int(wires)


def uniform_bound(side: int) -> float:
    """Bisection bound of uniform traffic on a ``side x side`` mesh, flits/PE/cycle [DT04]."""
    return UNIFORM_BOUND_NUMERATOR / side


def _traffic(
    spec: WaferSpec, config: StudyConfig, mesh: Mesh, routing: str, rate: float, seed: int
) -> dict[str, Any]:
    cfg = TrafficConfig(
        width=mesh.width,
        height=mesh.height,
        pattern="uniform",
        rate=rate,
        packet_size=PACKET_SIZE_FLITS,
        routing=routing,
        cycles=config.traffic_cycles,
        warmup=config.traffic_warmup_cycles,
        seed=seed,
    )
    return run_traffic(cfg, spec, mesh=mesh)


def zero_load_latency(
    spec: WaferSpec, config: StudyConfig, mesh: Mesh, routing: str, seed: int
) -> float:
    """Mean packet latency (cycles) at ``ZERO_LOAD_FRACTION`` of the bisection bound."""
    rate = ZERO_LOAD_FRACTION * uniform_bound(mesh.width)
    latency = _traffic(spec, config, mesh, routing, rate, seed)["avg_packet_latency_cycles"]
    return math.nan if latency is None else float(latency)


def saturation_throughput(
    spec: WaferSpec, config: StudyConfig, mesh: Mesh, routing: str, seed: int
) -> float:
    """Largest accepted rate (flits/PE/cycle) over ``SWEEP_FRACTIONS`` of the bisection
    bound, offered in ascending order up to the first saturated one."""
    best = 0.0
    for fraction in SWEEP_FRACTIONS:
        result = _traffic(spec, config, mesh, routing, fraction * uniform_bound(mesh.width), seed)
        best = max(best, float(result["accepted_rate"]))
        if result["saturated"]:
            break
    return best


def _traffic_figures(
    spec: WaferSpec, config: StudyConfig, mesh: Mesh, routing: str, seed: int
) -> tuple[str, float, float]:
    """(status, zero-load latency, saturation throughput); NaN figures if not measured."""
    if routing not in ROUTINGS:
        return "no_fault_routing", math.nan, math.nan
    try:
        latency = zero_load_latency(spec, config, mesh, routing, seed)
        throughput = saturation_throughput(spec, config, mesh, routing, seed)
    except (ConnectivityError, DeadlockError, ConfigError) as error:
        status = next(name for kind, name in _TRAFFIC_FAILURES if isinstance(error, kind))
        log.warning("traffic on the study window not measured (%s): %s", status, error)
        return status, math.nan, math.nan
    return "measured", latency, throughput


_TRAFFIC_FAILURES = (
    (ConnectivityError, "disconnected"),
    (DeadlockError, "deadlock"),
    (ConfigError, "refused"),
)


def window_traffic(spec: WaferSpec, config: StudyConfig, mesh: Mesh, seed: int) -> dict[str, Any]:
    """Faults, routing, status, zero-load latency and saturation throughput of a window."""
    holes, dead_wires = window_faults(mesh)
    routing = FAULT_ROUTING if holes or dead_wires else CLEAN_ROUTING
    status, latency, throughput = _traffic_figures(spec, config, mesh, routing, seed)
    return {
        "window_holes": holes,
        "window_dead_links": dead_wires,
        "traffic_routing": routing,
        "traffic_status": TRAFFIC_STATUS[status],
        "zero_load_latency_cycles": latency,
        "saturation_throughput_flits_per_pe_cycle": throughput,
    }


def measure_point(
    spec: WaferSpec,
    config: StudyConfig,
    window: Window,
    defects: DefectMap,
    strategy: str,
    traffic_seed: int,
) -> dict[str, Any]:
    """Every measured column of one row (all but the ids and the relative throughput)."""
    grid = repair(defects, strategy)
    mesh = Mesh.from_logical_grid(grid)
    row: dict[str, Any] = {
        "dead_pes": defects.dead_pes,
        "working_pes": grid.working_pes,
        "unrepaired_pes": grid.unrepaired_pes,
        "unrepaired_links": grid.unrepaired_links,
    }
    row |= route_stretch(mesh)
    return row | window_traffic(spec, config, window_mesh(mesh, window), traffic_seed)


# --- the study ---------------------------------------------------------------------------


def _points(config: StudyConfig) -> int:
    return len(config.densities_per_cm2) * len(config.strategies) * config.seeds


def _defect_map(spec: WaferSpec, config: StudyConfig, density: float, seed: int) -> DefectMap:
    params = {**config.model_params, "defect_density_per_cm2": density}
    return generate(spec, config.model, seed, **params)


def _point_ids(density: float, strategy: str, index: int, sample: SampleSeeds) -> dict:
    return {
        "defect_density_per_cm2": density,
        "strategy": strategy,
        "seed_index": index,
        "defect_seed": sample.defect_seed,
        "traffic_seed": sample.traffic_seed,
    }


def baselines(spec: WaferSpec, config: StudyConfig, seeds: list[int]) -> dict[str, np.ndarray]:
    """Zero-load latency and saturation throughput of the defect-free window per traffic
    seed, under both routings (so a faulty window's figures can be split into the cost of
    its faults and the cost of switching routing)."""
    full = Mesh.full(config.window_pes, config.window_pes)
    out = {}
    for routing in (CLEAN_ROUTING, FAULT_ROUTING):
        figures = [_traffic_figures(spec, config, full, routing, seed) for seed in seeds]
        out[f"{routing}_zero_load_latency_cycles"] = np.array([f[1] for f in figures])
        out[f"{routing}_saturation_throughput_flits_per_pe_cycle"] = np.array(
            [f[2] for f in figures]
        )
    return out


def run_study(
    spec: WaferSpec, config: StudyConfig, progress: ProgressCallback | None = None
) -> StudyResult:
    """Every (density, strategy, seed) point of ``config`` on ``spec``; see the module doc.

    ``progress`` is called after each point with a :class:`StudyProgress`.
    """
    window = centred_window(spec, config.window_pes)
    samples = sample_seeds(config.seed, config.seeds)
    start = time.perf_counter()
    baseline = baselines(spec, config, [s.traffic_seed for s in samples])
    reference = baseline[f"{CLEAN_ROUTING}_saturation_throughput_flits_per_pe_cycle"]
    rows: list[dict[str, Any]] = []
    for density in config.densities_per_cm2:
        for index, sample in enumerate(samples):
            defects = _defect_map(spec, config, density, sample.defect_seed)
            for strategy in config.strategies:
                row = measure_point(spec, config, window, defects, strategy, sample.traffic_seed)
                row |= _point_ids(density, strategy, index, sample)
                throughput = row["saturation_throughput_flits_per_pe_cycle"]
                row["relative_saturation_throughput"] = throughput / reference[index]
                rows.append(row)
                if progress is not None:
                    progress(StudyProgress(len(rows), _points(config), _since(start)))
    return StudyResult(spec, config, window, _columns(rows), baseline, _since(start))


def _since(start: float) -> float:
    return time.perf_counter() - start


def _columns(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Row dicts -> one typed array per column of :data:`ROW_COLUMNS`."""
    return {
        name: np.array([row[name] for row in rows], dtype=dtype).reshape(len(rows))
        for name, dtype in ROW_COLUMNS.items()
    }


# --- the result --------------------------------------------------------------------------


class Aggregate(NamedTuple):
    """Every metric's mean and 95 % interval over the seeds of one (density, strategy)."""

    defect_density_per_cm2: float
    strategy: str
    metrics: dict[str, MeanCI]


@dataclass(frozen=True, eq=False)
class StudyResult:
    """The study table (one row per density, strategy and seed) and what produced it."""

    spec: WaferSpec
    config: StudyConfig
    window: Window
    rows: dict[str, np.ndarray]  # ROW_COLUMNS, each (points,)
    baselines: dict[str, np.ndarray]  # float64 (seeds,) each: defect-free window figures
    wall_s: float

    def __len__(self) -> int:
        return int(self.rows["seed_index"].size)

    def aggregates(self) -> list[Aggregate]:
        """One :class:`Aggregate` per (density, strategy), in the config's order."""
        out = []
        for density in self.config.densities_per_cm2:
            for strategy in self.config.strategies:
                mask = (self.rows["defect_density_per_cm2"] == density) & (
                    self.rows["strategy"] == strategy
                )
                metrics = {name: mean_ci(self.rows[name][mask]) for name in METRICS}
                out.append(Aggregate(density, strategy, metrics))
        return out

    def to_json(self) -> dict[str, Any]:
        """JSON-ready summary: aggregates, config, spec, window, seed and version."""
        return {
            "format": FORMAT,
            "config": self.config.to_dict(),
            "spec": self.spec.to_dict(),
            "seed": self.config.seed,
            "wafersim_version": wafer.__version__,
            "points": len(self),
            "traffic_window": self._window_summary(),
            "defect_free_window": {
                name: [_finite(v) for v in values.tolist()]
                for name, values in self.baselines.items()
            },
            "traffic_status_codes": TRAFFIC_STATUS,
            "aggregates": [_aggregate_json(a) for a in self.aggregates()],
            "wall_s": self.wall_s,
        }

    def _window_summary(self) -> dict[str, Any]:
        x0, y0, side = self.window
        return {
            "x0": x0,
            "y0": y0,
            "side_pes": side,
            "routing_without_faults": CLEAN_ROUTING,
            "routing_with_faults": FAULT_ROUTING,
            "packet_size_flits": PACKET_SIZE_FLITS,
            "zero_load_rate_flits_per_pe_cycle": ZERO_LOAD_FRACTION * uniform_bound(side),
            "sweep_rates_flits_per_pe_cycle": [f * uniform_bound(side) for f in SWEEP_FRACTIONS],
            "note": f"traffic is measured on this {side}x{side} window of the repaired logical "
            "mesh, centred on the wafer, not on the whole wafer",
        }

    def _attrs(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "spec": json.dumps(self.spec.to_dict(), sort_keys=True),
            "config": json.dumps(self.config.to_dict(), sort_keys=True),
            "seed": self.config.seed,
            "window": json.dumps(self._window_summary(), sort_keys=True),
            "traffic_status_codes": json.dumps(TRAFFIC_STATUS, sort_keys=True),
            "wafersim_version": wafer.__version__,
            "wall_s": self.wall_s,
        }

    def save_hdf5(self, path: str | Path) -> None:
        """Write the table (group ``rows``, one dataset per column), the aggregates, the
        defect-free window figures and the provenance (attributes) to HDF5, atomically."""
        with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
            f.attrs.update(self._attrs())
            _write_columns(f.create_group("rows"), self.rows)
            _write_columns(f.create_group("aggregates"), _aggregate_columns(self.aggregates()))
            _write_columns(f.create_group("defect_free_window"), self.baselines)

    @classmethod
    def load_hdf5(cls, path: str | Path) -> StudyResult:
        """Read a study written by :meth:`save_hdf5`; anything else raises ConfigError."""
        path = Path(path)
        if not path.is_file() or not h5py.is_hdf5(path):
            raise ConfigError(f"{path}: not an HDF5 file, so not a wafersim defect study")
        try:
            with h5py.File(path, "r") as f:
                return _read_study(f)
        except (KeyError, ValueError, TypeError, OSError) as error:
            raise ConfigError(f"{path}: not a valid wafersim defect study: {error}") from None

    def plot(self, path: str | Path) -> None:
        """PNG: relative saturation throughput and mean route stretch against defect density,
        one line per repair strategy with its 95 % interval as a band."""
        plot_study(self, path)


def _read_study(f: h5py.File) -> StudyResult:
    if f.attrs.get("format") != FORMAT:
        raise ConfigError(f"format attribute is {f.attrs.get('format')!r}, not {FORMAT!r}")
    rows = {name: _read_column(f["rows"][name], dtype) for name, dtype in ROW_COLUMNS.items()}
    window = json.loads(f.attrs["window"])
    return StudyResult(
        spec=spec_from_dict(json.loads(f.attrs["spec"])),
        config=StudyConfig.from_dict(json.loads(f.attrs["config"])),
        window=Window(window["x0"], window["y0"], window["side_pes"]),
        rows=rows,
        baselines={name: data[()] for name, data in f["defect_free_window"].items()},
        wall_s=float(f.attrs["wall_s"]),
    )


def _finite(value: float) -> float | None:
    """JSON has no NaN: ``None`` stands for a figure that could not be measured."""
    return float(value) if math.isfinite(value) else None


def _aggregate_json(aggregate: Aggregate) -> dict[str, Any]:
    out: dict[str, Any] = {
        "defect_density_per_cm2": aggregate.defect_density_per_cm2,
        "strategy": aggregate.strategy,
    }
    for name, ci in aggregate.metrics.items():
        out[name] = {
            "mean": _finite(ci.mean),
            "ci95_half_width": _finite(ci.half_width),
            "ci95_low": _finite(ci.low),
            "ci95_high": _finite(ci.high),
            "n": ci.n,
        }
    return out


def _aggregate_columns(aggregates: list[Aggregate]) -> dict[str, np.ndarray]:
    """Aggregates as columns: density, strategy, and per metric mean, half-width and n."""
    columns: dict[str, np.ndarray] = {
        "defect_density_per_cm2": np.array([a.defect_density_per_cm2 for a in aggregates]),
        "strategy": np.array([a.strategy for a in aggregates], dtype="U16"),
    }
    for name in METRICS:
        cis = [a.metrics[name] for a in aggregates]
        columns[f"{name}_mean"] = np.array([c.mean for c in cis], np.float64)
        columns[f"{name}_ci95_half_width"] = np.array([c.half_width for c in cis], np.float64)
        columns[f"{name}_n"] = np.array([c.n for c in cis], np.int64)
    return columns


def _write_columns(group: h5py.Group, columns: dict[str, np.ndarray]) -> None:
    for name, values in columns.items():
        data = np.char.encode(values, "utf-8") if values.dtype.kind == "U" else values
        group.create_dataset(name, data=data)


def _read_column(dataset: h5py.Dataset, dtype: str) -> np.ndarray:
    data = dataset[()]
    return (
        np.char.decode(data, "utf-8").astype(dtype)
        if data.dtype.kind == "S"
        else data.astype(dtype)
    )


# --- plot --------------------------------------------------------------------------------


def plot_study(result: StudyResult, path: str | Path) -> None:
    """Two panels against defect density (log axis where every density shown is > 0)."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    shown = [a for a in result.aggregates() if a.defect_density_per_cm2 > 0]
    log_x = bool(shown)
    shown = shown or result.aggregates()
    for i, strategy in enumerate(result.config.strategies):
        mine = [a for a in shown if a.strategy == strategy]
        x = np.array([a.defect_density_per_cm2 for a in mine])
        style = {"label": strategy, "marker": MARKERS[i % len(MARKERS)]}
        _band(left, x, [a.metrics["relative_saturation_throughput"] for a in mine], style)
        _band(right, x, [a.metrics["mean_route_stretch_hops"] for a in mine], style)
    _routing_reference(left, result)
    side = result.window.side
    left.set_ylabel(f"saturation throughput / defect-free ({side}x{side} window)")
    right.set_ylabel("mean route stretch (added hops per multicast)")
    for ax in (left, right):
        ax.set_xscale("log" if log_x else "linear")
        ax.set_xlabel("defect density (defects / cm$^2$)")
        ax.grid(True, alpha=0.3)
        ax.legend(title="repair")
    zero = (
        " (density 0 not shown on the log axis)"
        if log_x and 0.0 in result.config.densities_per_cm2
        else ""
    )
    fig.suptitle(
        f"{result.spec.name}: {result.config.seeds} seeds, mean and 95 % CI{zero}", fontsize=10
    )
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)


def _band(ax: Any, x: np.ndarray, cis: list[MeanCI], style: dict[str, str]) -> None:
    mean = np.array([c.mean for c in cis])
    half = np.array([c.half_width for c in cis])
    (line,) = ax.plot(x, mean, **style)
    ax.fill_between(x, mean - half, mean + half, color=line.get_color(), alpha=0.2)


def _routing_reference(ax: Any, result: StudyResult) -> None:
    """A dashed line at the defect-free window's throughput under FAULT_ROUTING (relative
    to xy): what a faulty window would reach if its faults cost nothing."""
    fault = result.baselines[f"{FAULT_ROUTING}_saturation_throughput_flits_per_pe_cycle"]
    clean = result.baselines[f"{CLEAN_ROUTING}_saturation_throughput_flits_per_pe_cycle"]
    ratio = mean_ci(fault / clean).mean
    if math.isfinite(ratio):
        label = f"defect-free, {FAULT_ROUTING} routing"
        ax.axhline(ratio, color="gray", linestyle="--", linewidth=1, label=label)
