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

This module runs the study; the rest lives by concept: :mod:`wafersim.study_config` (what a
study sweeps), :mod:`wafersim.study_routes` (route stretch), :mod:`wafersim.study_traffic` (the
window and its traffic, :data:`FAULT_ROUTING`, :data:`TRAFFIC_STATUS`), :mod:`wafersim.stats`
(:data:`T_CRITICAL_95`, the intervals), :mod:`wafersim.study_result` (the table, aggregates,
JSON and HDF5) and :mod:`wafersim.study_plot` (the PNG).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from wafersim.fabric.mesh import Mesh
from wafersim.study_config import StudyConfig
from wafersim.study_result import ROW_COLUMNS, StudyResult
from wafersim.study_routes import route_stretch
from wafersim.study_traffic import (
    CLEAN_ROUTING,
    Window,
    baselines,
    centred_window,
    window_mesh,
    window_traffic,
)
from wafersim.wafer.defects import DefectMap, generate
from wafersim.wafer.repair import repair
from wafersim.wafer.spec import WaferSpec


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
