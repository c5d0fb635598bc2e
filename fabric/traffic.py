"""Synthetic traffic on the fabric, for comparison with network-on-chip simulators.

Every PE is a source and a sink. Packets are created by a Bernoulli process (offered rate
``rate`` flits per PE per cycle, so a packet with probability ``rate / packet_size`` each
cycle) into an unbounded source queue; their flits travel in order behind the head on one
dimension-order path (wormhole). Packet latency runs from creation to tail delivery;
network latency from the head entering the router to tail delivery. Statistics cover
packets created at or after ``warmup`` and delivered before ``cycles``.

At zero load a packet of ``F`` flits over ``h`` hops takes ``h * hop_latency + F`` cycles:
one cycle from the source queue into the router, ``h`` link traversals, and ``F - 1``
cycles for the body to follow the head. Every link is one hop here, also one that repair
stretched over several physical hops (PE programs pay those; tested on every grant, they
cost the traffic copy of the engine's step 2-3 %); the summary counts such links
(``stretched_links_as_one_hop``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from wafersim.fabric import _engine_jit as K
from wafersim.fabric.engine import (
    ENGINE_IN_USE,
    REASON_NAMES,
    check_max_cycles,
    chunk_runner,
    compiles_noted,
    configure_threads,
    fabric_arrays,
)
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.reroute import check_connected
from wafersim.fabric.state import (
    LATENCY_BINS,
    TrafficArrays,
    allocate_state,
    empty_program,
    new_traffic,
)
from wafersim.fabric.trace import TraceRecorder
from wafersim.fabric.updown import updown_tables
from wafersim.wafer.errors import ConfigError, excerpt
from wafersim.wafer.spec import WaferSpec

PATTERNS = {"uniform": 0, "transpose": 1, "bitcomp": 2, "hotspot": 3, "neighbor": 4}
ROUTINGS = {"xy": 0, "yx": 1, "updown": 2}  # updown: fabric/updown.py, for meshes with holes
HOTSPOT_FRACTION = 0.25  # default share of hotspot packets sent to the centre PE
SATURATION_RATIO = 0.95  # accepted below this share of offered -> saturated
NEVER = K.NEVER  # arrival cycle of a source that offers nothing
TO_ANOTHER_PE = ("uniform", "hotspot")  # patterns whose packets never go to their source
MIN_PES_TO_ANOTHER = 2  # working PEs those patterns need: a source and another
MAX_TRAFFIC_CYCLES = 2**24  # injection cycles travel as float32 payload: exact below 2^24


@dataclass(frozen=True)
class TrafficConfig:
    width: int = 8
    height: int = 8
    pattern: str = "uniform"
    rate: float = 0.1
    packet_size: int = 4
    queue_depth: int | None = None  # None: the spec's router queue depth
    routing: str = "xy"
    cycles: int = 2000
    warmup: int = 500
    seed: int = 0
    threads: int = 1
    drain_cycles: int = 0  # the last cycles create no packets, so the network can empty
    colors: int = K.TRAFFIC_COLORS  # packets spread over this many colors (virtual channels)
    hotspot_fraction: float = HOTSPOT_FRACTION  # hotspot: share of packets to the centre PE

    def __post_init__(self) -> None:
        _check_range("width", self.width, 1, 4096)
        _check_range("height", self.height, 1, 4096)
        _check_choice("pattern", self.pattern, PATTERNS)
        _check_choice("routing", self.routing, ROUTINGS)
        _check_range("rate", self.rate, 0.0, 1.0)
        _check_range("packet_size", self.packet_size, 1, 4096)
        if self.queue_depth is not None:
            _check_range("queue_depth", self.queue_depth, 1, 1024)
        _check_range("cycles", self.cycles, 1, MAX_TRAFFIC_CYCLES)
        _check_range("warmup", self.warmup, 0, self.cycles - 1)
        _check_range("seed", self.seed, 0, 2**63 - 1)
        _check_range("drain_cycles", self.drain_cycles, 0, self.cycles - self.warmup - 1)
        _check_range("colors", self.colors, 1, K.MAX_COLORS)
        _check_range("hotspot_fraction", self.hotspot_fraction, 0.0, 1.0)
        if self.pattern != "hotspot" and self.hotspot_fraction != HOTSPOT_FRACTION:
            raise ConfigError(f"hotspot_fraction={excerpt(self.hotspot_fraction)} applies to "
                              f"pattern='hotspot' only, not {self.pattern!r}")  # fmt: skip
        grid = f"grid {self.width}x{self.height} (width and height in [1, 4096], not both 1)"
        _check_senders(self.pattern, self.width * self.height, grid)


def _check_range(name: str, value, low, high) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ConfigError(f"{name}={excerpt(value)} is out of range [{low}, {high}]")


def _check_choice(name: str, value: str, choices: dict) -> None:
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(f"{name}={excerpt(value)} is not one of: {', '.join(choices)}")


def _check_senders(pattern: str, pes: int, where: str) -> None:
    """Uniform and hotspot packets go to another working PE, drawn modulo the others' count:
    with one PE there is none, and the draw would divide by zero in the engine."""
    if pattern in TO_ANOTHER_PE and pes < MIN_PES_TO_ANOTHER:
        raise ConfigError(
            f"{where}: {pes} working PE(s), but pattern {pattern!r} sends each packet to another "
            f"PE, so it needs at least {MIN_PES_TO_ANOTHER} (transpose, bitcomp and neighbor "
            "run on one)"
        )


def traffic_arrays(cfg: TrafficConfig, mesh: Mesh) -> TrafficArrays:
    """Sources seeded from one SeedSequence, each PE with its own stream and first arrival;
    holes neither send nor receive."""
    alive = mesh.alive.reshape(-1)
    seeds = np.random.SeedSequence(cfg.seed).spawn(2)[0].generate_state(alive.size, np.uint64)
    rng = seeds | np.uint64(1)  # xorshift state must not be zero
    prob = cfg.rate / cfg.packet_size
    stop = cfg.cycles - cfg.drain_cycles
    pattern = PATTERNS[cfg.pattern]
    tr = new_traffic(
        alive,
        cfg.width,
        pattern,
        cfg.packet_size,
        prob,
        cfg.warmup,
        cfg.hotspot_fraction,
        stop,
        rng,
        LATENCY_BINS,
    )
    if prob > 0:
        K.first_arrivals(tr.rng, prob, tr.next_arrival)
    tr.next_arrival[(~alive) | (prob == 0)] = NEVER
    return tr


# the state arrays the summary reads (summarize, cycles_by_reason): a GPU run copies back
# these alone (the queues and links are most of the state)
SUMMARY_STATE = ("busy", "link_flits", "occupancy", "link_flags", "rx_count", "reasons")


def run_traffic(
    cfg: TrafficConfig,
    spec: WaferSpec,
    mesh: Mesh | None = None,
    trace: TraceRecorder | None = None,
    engine: str | None = None,
) -> dict:
    """Run synthetic traffic on ``mesh`` (default: a full ``width x height`` mesh) on
    ``engine`` (see ``fabric.engine.ENGINES``); returns the summary (JSON-ready)."""
    check_max_cycles(cfg.cycles)
    engine = engine or ENGINE_IN_USE.get()
    run = chunk_runner(engine)
    parallel = configure_threads(cfg.threads)
    mesh = mesh or Mesh.full(cfg.width, cfg.height)
    _check_mesh(cfg, mesh)
    if cfg.queue_depth is not None:
        spec = spec.replace({"router.queue_depth_wavelets": cfg.queue_depth})
    _check_range("colors", cfg.colors, 1, spec.router.colors)  # the router's, per its spec
    route = np.zeros((mesh.pes, 5, cfg.colors), np.uint8)
    mode = ROUTINGS[cfg.routing]
    updown = updown_tables(mesh) if mode == K.DOR_TABLE else None
    color_dor = np.ones(cfg.colors, np.uint8)
    fab = fabric_arrays(mesh, spec, route, color_dor, True, mode, updown)
    st = allocate_state(mesh.pes, cfg.colors, fab.depth, fab.slots, 1, 1)
    tr = traffic_arrays(cfg, mesh)
    st.wake[~mesh.alive.reshape(-1)] = NEVER  # holes never wake
    if trace is not None:
        trace.begin(mesh.width, mesh.height, traffic=True, alive=mesh.alive)
    with compiles_noted() as compiles:
        start = time.perf_counter()
        run(fab, st, empty_program(mesh.pes), tr, cfg.cycles, parallel, trace, keep=SUMMARY_STATE)
        wall = time.perf_counter() - start - sum(compiles)  # the run's own time: no compile
    stretched = int(np.count_nonzero(mesh.hops() > 1)) // 2  # each wire from both ends
    summary = summarize(cfg, tr, st, wall)
    return {**summary, "pe_cycles_by_reason": cycles_by_reason(cfg, st, mesh),
            "stretched_links_as_one_hop": stretched, "engine": engine}  # fmt: skip


def cycles_by_reason(cfg: TrafficConfig, st, mesh: Mesh) -> dict[str, int]:
    """The working PEs' cycles by reason (``fabric.engine.REASON_NAMES``): a source injecting
    a flit computes, one whose flit finds its queue full waits for output, the rest idle."""
    alive = mesh.alive.reshape(-1)
    counts = st.reasons[alive, : K.REASONS].sum(axis=0)
    counts[K.REASON_COMPUTING] = st.busy[alive].sum()
    counts[K.REASON_IDLE] = int(alive.sum()) * cfg.cycles - counts[: K.REASON_IDLE].sum()
    return dict(zip(REASON_NAMES, map(int, counts), strict=True))


def _check_mesh(cfg: TrafficConfig, mesh: Mesh) -> None:
    """Dimension order cannot pass holes; non-uniform patterns may aim at one."""
    if (mesh.width, mesh.height) != (cfg.width, cfg.height):
        raise ConfigError(f"mesh is {mesh.width}x{mesh.height}, config {cfg.width}x{cfg.height}")
    where = f"the {mesh.width}x{mesh.height} mesh"
    _check_senders(cfg.pattern, int(np.count_nonzero(mesh.alive)), where)
    defective = not mesh.alive.all() or mesh.dead_link.any()
    if not defective:
        return
    if cfg.routing != "updown":
        raise ConfigError(
            f"routing={cfg.routing!r} cannot route around holes or dead links; use updown"
        )
    if cfg.pattern != "uniform":
        raise ConfigError(f"pattern={cfg.pattern!r} needs a mesh without holes; use uniform")
    check_connected(mesh)


def summarize(cfg: TrafficConfig, tr: TrafficArrays, st, wall: float) -> dict:
    """Rates are per working PE and per cycle of the window in which packets are created."""
    pes = cfg.width * cfg.height
    working = tr.targets.size
    window = tr.stop - cfg.warmup
    packets = int(tr.packets.sum())
    accepted = float(tr.flits_delivered.sum()) / (working * window)
    offered = cfg.rate
    return {
        "grid": [cfg.width, cfg.height],
        "working_pes": int(working),
        "pattern": cfg.pattern,
        "hotspot_fraction": cfg.hotspot_fraction if cfg.pattern == "hotspot" else None,
        "routing": cfg.routing,
        "packet_size": cfg.packet_size,
        "colors": cfg.colors,
        "offered_rate": offered,
        "accepted_rate": accepted,
        "packets_measured": packets,
        "avg_packet_latency_cycles": _mean(tr.latency_sum.sum(), packets),
        "avg_network_latency_cycles": _mean(tr.network_latency_sum.sum(), packets),
        "p99_packet_latency_cycles": _percentile(tr.hist.sum(axis=0), 0.99),
        "avg_hops": _mean(tr.hops.sum(), tr.packets_created.sum()),
        "flits_injected": int(st.busy.sum()),
        "flits_ejected": int(st.link_flits[:, K.RAMP].sum()),
        "flits_in_flight": int(
            st.occupancy.sum() + st.link_flags[:, :, :4].sum() + st.rx_count.sum()
        ),
        "saturated": bool(offered > 0 and accepted < SATURATION_RATIO * offered),
        "cycles": cfg.cycles,
        "warmup": cfg.warmup,
        "router_cycles_per_s": pes * cfg.cycles / wall if wall > 0 else 0.0,
        "sim_wall_s": wall,
        "seed": cfg.seed,
        "threads": cfg.threads,
    }


def _mean(total, count) -> float | None:
    return float(total) / float(count) if count else None


def _percentile(hist: np.ndarray, q: float) -> float | None:
    """The smallest latency with at least ``q`` of packets at or below it."""
    total = hist.sum()
    if total == 0:
        return None
    return float(np.searchsorted(np.cumsum(hist), q * total))
