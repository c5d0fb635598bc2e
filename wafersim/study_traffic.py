"""Traffic on the study window: its mesh, its faults, its zero-load latency and its
saturation throughput, and the defect-free window's figures (see :mod:`wafersim.study`)."""

from __future__ import annotations

import logging
import math
from typing import Any, NamedTuple

import numpy as np

from wafersim.fabric.mesh import Mesh
from wafersim.fabric.traffic import ROUTINGS, TrafficConfig, run_traffic
from wafersim.study_config import WINDOW_PES_RANGE, StudyConfig
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

TRAFFIC_STATUS = {
    "measured": 0,
    "no_fault_routing": 1,  # FAULT_ROUTING is not in fabric.traffic.ROUTINGS
    "disconnected": 2,  # the window's working PEs form several islands
    "deadlock": 3,
    "refused": 4,  # run_traffic refused the window (ConfigError)
}


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


def window_summary(window: Window) -> dict[str, Any]:
    """Where the window lies and how its traffic is offered, for a study's outputs."""
    x0, y0, side = window
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
