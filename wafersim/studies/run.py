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
* **traffic**, on ``windows_per_map`` windows of ``window_pes x window_pes`` PEs of the
  repaired logical mesh (the cycle engine is too slow for the whole wafer), each with its
  holes and dead links. The windows' positions are drawn uniformly over the logical grid
  from the seed index's window seed, the same for every density and strategy, so the mean
  over a map's windows estimates the whole wafer's mean. Uniform random traffic
  (``PACKET_SIZE_FLITS``-flit packets) is routed ``xy`` on a window without faults and
  :data:`FAULT_ROUTING` on one with faults. Zero-load latency is the mean packet latency at
  ``ZERO_LOAD_FRACTION`` of the bisection bound ``4 / k`` flits per PE per cycle;
  saturation throughput is the largest accepted rate over offered rates of
  ``SWEEP_FRACTIONS`` of that bound, stopping at the first saturated one (flits per working
  PE per cycle, as :func:`fabric.traffic.run_traffic` reports them). The defect-free window
  is run once per traffic seed under both routings (``StudyResult.baselines``); a window
  without faults *is* that window, so it takes those figures without being run again.
  ``relative_saturation_throughput`` divides each window's throughput by the defect-free
  window's under the *same* routing and traffic seed: the cost of the faults alone, not of
  the routing they force. ``relative_saturation_throughput_vs_xy`` divides by the
  defect-free window's under ``xy``: the faults plus the switch of routing.
  ``fault_routed_windows`` is the share of windows that needed the switch. A map's traffic
  figures are the means over its measured windows; each window's are kept in
  ``StudyResult.window_rows``.

A window the fabric cannot run (no fault-tolerant routing available, islands, a deadlock)
gets NaN traffic figures and a ``traffic_status`` code (:data:`TRAFFIC_STATUS`), is left out
of its map's means and counted out of ``measured_windows``; the study goes on. Seeds: one
``SeedSequence(seed)`` spawns one child per seed index, which gives that index's defect-map
seed, traffic seed and window seed; every density and strategy reuses them (common random
numbers, so strategies are compared on the same maps, windows and traffic).

Aggregates per (density, strategy) are the mean over seeds of the finite per-map samples and
a 95 % confidence interval, ``mean +- t * s / sqrt(n)`` with Student's t for ``n - 1``
degrees of freedom (:data:`T_CRITICAL_95`), clipped to the range of the column
(:data:`wafersim.studies.result.METRIC_COLUMNS`).

This module runs the study; the rest lives by concept: :mod:`wafersim.studies.config` (what a
study sweeps), :mod:`wafersim.studies.routes` (route stretch), :mod:`wafersim.studies.traffic` (the
windows and their traffic, :data:`FAULT_ROUTING`, :data:`TRAFFIC_STATUS`), :mod:`wafersim.stats`
(:data:`T_CRITICAL_95`, the intervals), :mod:`wafersim.studies.result` (the table, aggregates,
JSON and HDF5) and :mod:`wafersim.plots.study` (the PNG).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from wafersim.fabric.mesh import Mesh
from wafersim.studies.config import StudyConfig
from wafersim.studies.result import ROW_COLUMNS, WINDOW_COLUMNS, StudyResult
from wafersim.studies.routes import route_stretch
from wafersim.studies.traffic import (
    Reference,
    Window,
    baselines,
    draw_windows,
    map_traffic,
    reference_figures,
    window_mesh,
    window_traffic,
)
from wafersim.wafer.defects import DefectMap, generate
from wafersim.wafer.repair import repair
from wafersim.wafer.spec import WaferSpec


class SampleSeeds(NamedTuple):
    defect_seed: int
    traffic_seed: int
    window_seed: int


def sample_seeds(seed: int, count: int) -> list[SampleSeeds]:
    """Per seed index a defect, a traffic and a window seed, from ``SeedSequence(seed)``."""
    children = np.random.SeedSequence(seed).spawn(count)
    words = [child.generate_state(3, np.uint64) >> np.uint64(1) for child in children]
    return [SampleSeeds(*map(int, triple)) for triple in words]


class StudyProgress(NamedTuple):
    """Passed to the progress callback after each study point."""

    done: int
    total: int
    elapsed_s: float


ProgressCallback = Callable[[StudyProgress], None]


class MapSample(NamedTuple):
    """What one seed index of one density measures with: its map, windows and traffic."""

    defects: DefectMap
    positions: np.ndarray  # int64 (windows, 2): each window's logical (x0, y0)
    traffic_seed: int
    reference: Reference  # the defect-free window's figures under this traffic seed


def measure_point(
    spec: WaferSpec, config: StudyConfig, sample: MapSample, strategy: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every measured column of one row, and each of its windows' figures."""
    grid = repair(sample.defects, strategy)
    mesh = Mesh.from_logical_grid(grid)
    row: dict[str, Any] = {
        "dead_pes": sample.defects.dead_pes,
        "working_pes": grid.working_pes,
        "unrepaired_pes": grid.unrepaired_pes,
        "unrepaired_links": grid.unrepaired_links,
    }
    row |= route_stretch(mesh)
    windows = []
    for x0, y0 in sample.positions.tolist():
        window = window_mesh(mesh, Window(x0, y0, config.window_pes))
        windows.append(window_traffic(spec, config, window, sample.traffic_seed, sample.reference))
    return row | map_traffic(windows), windows


def _points(config: StudyConfig) -> int:
    return len(config.densities_per_cm2) * len(config.strategies) * config.seeds


def _defect_map(spec: WaferSpec, config: StudyConfig, density: float, seed: int) -> DefectMap:
    params = {**config.model_params, "defect_density_per_cm2": density}
    return generate(spec, config.model, seed, **params)


def _point_ids(density: float, strategy: str, index: int, seeds: SampleSeeds) -> dict:
    return {
        "defect_density_per_cm2": density,
        "strategy": strategy,
        "seed_index": index,
        "defect_seed": seeds.defect_seed,
        "traffic_seed": seeds.traffic_seed,
        "window_seed": seeds.window_seed,
    }


def _window_rows(ids: dict[str, Any], positions: np.ndarray, windows: list[dict]) -> list[dict]:
    """Each window's figures with its point's ids, its index and its position."""
    keep = {name: ids[name] for name in ("defect_density_per_cm2", "strategy", "seed_index")}
    return [
        {**keep, "window_index": i, "x0": x0, "y0": y0, **window}
        for i, ((x0, y0), window) in enumerate(zip(positions.tolist(), windows, strict=True))
    ]


def run_study(
    spec: WaferSpec, config: StudyConfig, progress: ProgressCallback | None = None
) -> StudyResult:
    """Every (density, strategy, seed) point of ``config`` on ``spec``; see the module doc.

    ``progress`` is called after each point with a :class:`StudyProgress`.
    """
    seeds = sample_seeds(config.seed, config.seeds)
    side, count = config.window_pes, config.windows_per_map
    positions = np.stack([draw_windows(spec, side, count, s.window_seed) for s in seeds])
    start = time.perf_counter()
    baseline = baselines(spec, config, [s.traffic_seed for s in seeds])
    rows: list[dict[str, Any]] = []
    window_rows: list[dict[str, Any]] = []
    for density in config.densities_per_cm2:
        for index, pair in enumerate(seeds):
            defects = _defect_map(spec, config, density, pair.defect_seed)
            reference = reference_figures(baseline, index)
            sample = MapSample(defects, positions[index], pair.traffic_seed, reference)
            for strategy in config.strategies:
                row, windows = measure_point(spec, config, sample, strategy)
                ids = _point_ids(density, strategy, index, pair)
                rows.append(row | ids)
                window_rows += _window_rows(ids, positions[index], windows)
                if progress is not None:
                    progress(StudyProgress(len(rows), _points(config), _since(start)))
    tables = _columns(rows, ROW_COLUMNS), _columns(window_rows, WINDOW_COLUMNS)
    return StudyResult(spec, config, positions, *tables, baseline, _since(start))


def _since(start: float) -> float:
    return time.perf_counter() - start


def _columns(rows: list[dict[str, Any]], columns: dict[str, str]) -> dict[str, np.ndarray]:
    """Row dicts -> one typed array per column of ``columns``."""
    return {
        name: np.array([row[name] for row in rows], dtype=dtype).reshape(len(rows))
        for name, dtype in columns.items()
    }
