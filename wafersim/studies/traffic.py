"""Traffic on the study's windows: where they lie, their meshes and faults, each window's
zero-load latency and saturation throughput against the defect-free window's, and a map's
figures as the mean over its windows (see :mod:`wafersim.studies.run`)."""

from __future__ import annotations

import logging
import math
from typing import Any, NamedTuple

import numpy as np

from wafersim.fabric.mesh import Mesh
from wafersim.fabric.traffic import ROUTINGS, TrafficConfig, run_traffic
from wafersim.studies.config import WINDOW_PES_RANGE, StudyConfig
from wafersim.wafer.errors import ConfigError, ConnectivityError, DeadlockError
from wafersim.wafer.geometry import E, N, S, W
from wafersim.wafer.spec import WaferSpec

log = logging.getLogger(__name__)

CLEAN_ROUTING = "xy"  # windows without holes or dead links
FAULT_ROUTING = "updown"  # windows with holes or dead links (fabric/updown.py)
PACKET_SIZE_FLITS = 4
ZERO_LOAD_FRACTION = 0.02  # zero-load offered rate, as a share of the bisection bound
SWEEP_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)  # of the bound
UNIFORM_BOUND_NUMERATOR = 4.0  # uniform traffic on a k x k mesh saturates by 4/k [DT04]
# [DT04] W. J. Dally and B. Towles, "Principles and Practices of Interconnection Networks",
# Morgan Kaufmann 2004, ch. 3: under uniform traffic each bisection channel of a k x k mesh
# carries k * rate / 4 flits per cycle, so one flit per channel per cycle caps rate at 4 / k.

MAP_FIGURES = (  # per map, each the mean over the map's measured windows
    "zero_load_latency_cycles",
    "saturation_throughput_flits_per_pe_cycle",
    "relative_saturation_throughput",
    "relative_saturation_throughput_vs_xy",
)

TRAFFIC_STATUS = {
    "measured": 0,
    "no_fault_routing": 1,  # FAULT_ROUTING is not in fabric.traffic.ROUTINGS
    "disconnected": 2,  # the window's working PEs form several islands
    "deadlock": 3,
    "refused": 4,  # run_traffic refused the window (ConfigError)
}


class Window(NamedTuple):
    """A traffic window: ``side x side`` logical PEs from logical ``(x0, y0)``."""

    x0: int
    y0: int
    side: int


Reference = dict[str, tuple[float, float]]  # routing -> defect-free (latency, throughput)


def check_window_side(spec: WaferSpec, side: int) -> None:
    """Refuse a window side that does not fit ``spec``'s logical grid."""
    width, height = spec.logical_width_pes, spec.logical_height_pes
    if side > min(width, height):
        raise ConfigError(
            f"window_pes={side} does not fit the {width}x{height} logical grid of "
            f"{spec.name!r}; allowed: [{WINDOW_PES_RANGE[0]}, {min(width, height)}]"
        )


def draw_windows(spec: WaferSpec, side: int, count: int, seed: int) -> np.ndarray:
    """int64 (count, 2): each window's logical ``(x0, y0)``, drawn independently and
    uniformly over every position where a ``side x side`` window fits, so that the mean over
    windows estimates the whole wafer's mean rather than one place's."""
    check_window_side(spec, side)
    rng = np.random.default_rng(seed)
    x0 = rng.integers(0, spec.logical_width_pes - side + 1, count)
    y0 = rng.integers(0, spec.logical_height_pes - side + 1, count)
    return np.stack([x0, y0], axis=1).astype(np.int64)


def traffic_summary(side: int, positions: np.ndarray) -> dict[str, Any]:
    """How the traffic figures were measured, for a study's outputs."""
    return {
        "side_pes": side,
        "windows_per_map": int(positions.shape[1]),
        "positions_x0_y0": positions.tolist(),  # per seed index, per window
        "routing_without_faults": CLEAN_ROUTING,
        "routing_with_faults": FAULT_ROUTING,
        "packet_size_flits": PACKET_SIZE_FLITS,
        "zero_load_rate_flits_per_pe_cycle": ZERO_LOAD_FRACTION * uniform_bound(side),
        "sweep_rates_flits_per_pe_cycle": [f * uniform_bound(side) for f in SWEEP_FRACTIONS],
        "note": f"traffic is measured on {positions.shape[1]} {side}x{side} windows of each "
        "repaired map, drawn uniformly over the logical grid per seed index (the same for "
        "every density and repair); a map's figure is the mean over its measured windows; "
        "relative_saturation_throughput divides each window's figure by the defect-free "
        "window's under the same routing and traffic seed, relative_saturation_throughput"
        f"_vs_xy by the defect-free window's under {CLEAN_ROUTING}",
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


_TRAFFIC_FAILURES = (
    (ConnectivityError, "disconnected"),
    (DeadlockError, "deadlock"),
    (ConfigError, "refused"),
)


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


def window_traffic(
    spec: WaferSpec, config: StudyConfig, mesh: Mesh, seed: int, reference: Reference
) -> dict[str, Any]:
    """Faults, routing, status and figures of one window, each throughput also relative to
    the defect-free window's under the same routing and under ``CLEAN_ROUTING``."""
    holes, dead_wires = window_faults(mesh)
    routing = FAULT_ROUTING if holes or dead_wires else CLEAN_ROUTING
    if routing == CLEAN_ROUTING:  # the defect-free window, already run with this seed
        status, latency, throughput = "measured", *reference[CLEAN_ROUTING]
    else:
        status, latency, throughput = _traffic_figures(spec, config, mesh, routing, seed)
    return {
        "window_holes": holes,
        "window_dead_links": dead_wires,
        "traffic_routing": routing,
        "traffic_status": TRAFFIC_STATUS[status],
        "zero_load_latency_cycles": latency,
        "saturation_throughput_flits_per_pe_cycle": throughput,
        "relative_saturation_throughput": _ratio(throughput, reference[routing][1]),
        "relative_saturation_throughput_vs_xy": _ratio(throughput, reference[CLEAN_ROUTING][1]),
    }


def _ratio(value: float, reference: float) -> float:
    return value / reference if reference > 0 else math.nan


def map_traffic(windows: list[dict[str, Any]]) -> dict[str, Any]:
    """A map's traffic columns from its windows: mean faults, the share routed with
    ``FAULT_ROUTING``, how many were measured, and each of :data:`MAP_FIGURES` as the mean
    over the measured ones."""
    measured = [w for w in windows if w["traffic_status"] == TRAFFIC_STATUS["measured"]]
    out: dict[str, Any] = {
        "window_holes": float(np.mean([w["window_holes"] for w in windows])),
        "window_dead_links": float(np.mean([w["window_dead_links"] for w in windows])),
        "fault_routed_windows": float(
            np.mean([w["traffic_routing"] == FAULT_ROUTING for w in windows])
        ),
        "measured_windows": len(measured),
    }
    for name in MAP_FIGURES:
        values = [w[name] for w in measured if math.isfinite(w[name])]
        out[name] = float(np.mean(values)) if values else math.nan
    return out


def baselines(spec: WaferSpec, config: StudyConfig, seeds: list[int]) -> dict[str, np.ndarray]:
    """Zero-load latency and saturation throughput of the defect-free window per traffic
    seed, under both routings (each window is compared with the one under its routing)."""
    full = Mesh.full(config.window_pes, config.window_pes)
    out = {}
    for routing in (CLEAN_ROUTING, FAULT_ROUTING):
        figures = [_traffic_figures(spec, config, full, routing, seed) for seed in seeds]
        out[f"{routing}_zero_load_latency_cycles"] = np.array([f[1] for f in figures])
        out[f"{routing}_saturation_throughput_flits_per_pe_cycle"] = np.array(
            [f[2] for f in figures]
        )
    return out


def reference_figures(baseline: dict[str, np.ndarray], index: int) -> Reference:
    """Seed index ``index``'s defect-free (latency, throughput) per routing."""
    return {
        routing: (
            float(baseline[f"{routing}_zero_load_latency_cycles"][index]),
            float(baseline[f"{routing}_saturation_throughput_flits_per_pe_cycle"][index]),
        )
        for routing in (CLEAN_ROUTING, FAULT_ROUTING)
    }
