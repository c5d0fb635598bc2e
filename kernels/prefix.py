"""The first cycles of a kernel run too long to finish at cycle level, and the pace they set.

A whole ``wse2`` wafer is 745,500 routers: a GPT-3 layer's GEMM on it runs for about a
million cycles (the fast tier: 1.14 M for its QKV projection), days on a CPU core.
:func:`run_prefix` builds the kernel's whole plan (every PE, route and op;
PEs doing the same work share programs), simulates its first ``stop_at``
cycles (``fabric.engine.simulate``'s ``stop_at``), and measures how far it got: the share of
the wavelets its edge ports send over the whole run that they have sent (a weight stream's
progress: each row's port sends its weights at the pace the row computes them), sampled along
the way, and the share of its PEs' ops done. The *pace* is the edge share per cycle over the
prefix's second half; it is *steady* where the last quarter's is within :data:`STEADY` of it
(a prefix still in the pipeline's fill is not: a whole wafer's first 2,000 cycles stream two
chunks; nor, often, one shorter than a chain's owner row takes to come round all rows, as
the reductions' lengths follow it). The whole run at that pace is the prefix plus what is
left at the pace (the last chunk's reduction after its last weight is not counted). For
weight streaming the model's own schedule of chunks says how much should be in by then
(:func:`kernels.gemm_weight_stream.weight_stream_schedule`): the comparison that needs no
steady pace. The fast tier
(:mod:`kernels.fast_tier`, GEMMs) and the analytic model estimate the same run; their errors
are against that projection.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from wafersim.fabric import _engine_jit as K
from wafersim.fabric.engine import simulate
from wafersim.fabric.program import row_repeats, task_ops
from wafersim.fabric.state import ProgramArrays
from wafersim.fabric.trace import SentProbe
from wafersim.kernels.fast_tier import fast_cycles
from wafersim.kernels.gemm_shape import GemmShape
from wafersim.kernels.gemm_weight_stream import chunk_offsets, weight_stream_schedule
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.kernel_plan import recorded
from wafersim.kernels.registry import analytic_cycles, run_kernel
from wafersim.wafer.dtypes import DType
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec

SAMPLES = 20  # pace samples over a prefix
STEADY = 0.1  # the last quarter's pace within this share of the second half's: steady


@dataclass(frozen=True)
class Prefix:
    """How far the first ``cycles`` of a run got, and the whole run at that pace."""

    cycles: int  # simulated
    finished: bool  # the run ended within them
    edge_share: float | None  # of the edge ports' wavelets (None: the kernel sends none)
    ops_share: float  # of the PEs' ops
    pace: float | None  # edge share a cycle over the prefix's second half
    steady: bool  # its last quarter kept that pace (within STEADY): past the pipeline's fill
    projected_cycles: int | None  # the whole run at that pace (its cycles if finished)
    fast_cycles: int | None  # the fast tier's estimate of the whole run (GEMMs)
    analytic_cycles: int
    # weight streaming: the share of the weights streamed in by ``cycles`` by the analytic
    # model's schedule of chunks (weight_stream_schedule), and by the fast tier's (the same
    # stretched to its estimate); None for other kernels and where the ports stream A in
    # first (inputs streamed: their wavelets count in edge_share too)
    analytic_share: float | None
    fast_share: float | None
    build_s: float  # building the plan (routes, programs, SRAM)
    sim_wall_s: float
    routers: int
    samples: list[tuple[int, float]] = field(repr=False)  # (cycle, edge share)

    def summary(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "samples"}
        for name in ("fast", "analytic"):
            share = out[f"{name}_share"]
            if share is not None and self.edge_share:
                out[f"{name}_share_error"] = share / self.edge_share - 1
        for name in ("fast", "analytic"):
            estimate = out[f"{name}_cycles"]
            if estimate is not None and self.projected_cycles:
                out[f"{name}_error"] = estimate / self.projected_cycles - 1
        out["router_cycles_per_s"] = self.routers * self.cycles / max(self.sim_wall_s, 1e-9)
        return out


def run_prefix(
    kernel: str,
    algo: str,
    shape: dict[str, int],
    grid: KernelGrid,
    spec: WaferSpec,
    dtype: DType,
    seed: int,
    stop_at: int,
    hole_fraction: float = 0.0,
    threads: int = 1,
    **options,
) -> Prefix:
    """Simulate the first ``stop_at`` cycles of ``kernel``/``algo`` on ``grid`` (inputs
    drawn from ``seed``) on the engine in use; see the module text."""
    check_stop_at(stop_at)
    start = time.perf_counter()
    record = recorded(run_kernel, kernel, algo, shape, grid, spec, dtype, seed, **options)
    routes, program, memory, max_cycles = record[1:]
    del record  # the plan's wiring and builder: gigabytes on a whole wafer, not run
    build = time.perf_counter() - start
    mesh = grid.mesh
    ports = grid.ports
    probe = SentProbe(max(1, stop_at // SAMPLES), ports)
    sim = simulate(mesh, spec, routes, program, memory, max_cycles=max(max_cycles, stop_at),
                   stop_at=stop_at, threads=threads, trace=probe)  # fmt: skip
    total = edge_wavelets(program, ports)
    shares = [sent / total for sent in probe.sent] if total else None
    pace = _pace(probe.cycles, shares, 2) if shares else None
    late = _pace(probe.cycles, shares, 4) if shares else None
    steady = bool(pace and late and abs(late / pace - 1) <= STEADY)
    projected = sim.cycles if sim.finished else _projected(sim.cycles, shares, pace)
    fast = None
    if kernel == "gemm":
        fast = fast_cycles(algo, shape, grid.rows, grid.cols, spec, dtype, hole_fraction, seed,
                           **options).cycles  # fmt: skip
    detour = grid.tree_detour if options.get("reduce") == "tree" else grid.detour
    gemm = {"detour": detour} if kernel == "gemm" else {}
    analytic = analytic_cycles(kernel, algo, shape, grid.rows, grid.cols, spec, dtype,
                               **options, **gemm)  # fmt: skip
    modelled = (None, None)
    staged = options.get("inputs", "resident") != "resident"  # the ports send A first
    if (kernel, algo) == ("gemm", "weight_stream") and not staged:
        modelled = _streamed_shares(GemmShape.of(shape), grid, spec, dtype, sim.cycles, analytic,
                                    fast, detour, options)  # fmt: skip
    assert sim.ops_done is not None  # a program's run counts the ops of each PE's tasks
    return Prefix(
        cycles=sim.cycles,
        finished=sim.finished,
        edge_share=shares[-1] if shares else None,
        ops_share=float(sim.ops_done.sum() / max(1, task_ops(program).sum())),
        pace=pace,
        steady=steady or sim.finished,
        projected_cycles=projected,
        fast_cycles=fast,
        analytic_cycles=analytic,
        analytic_share=modelled[0],
        fast_share=modelled[1],
        build_s=build,
        sim_wall_s=sim.sim_wall_s,
        routers=mesh.pes,
        samples=list(zip(probe.cycles, shares or [0.0] * len(probe.cycles), strict=True)),
    )


def _streamed_shares(shape: GemmShape, grid, spec, dtype, cycles, analytic, fast, detour,
                     options):  # fmt: skip
    """The weights' share streamed in by ``cycles`` by the analytic schedule of chunks, and
    by the fast tier's (the schedule stretched by ``fast / analytic``)."""
    m, k, n = shape
    _end, ends = weight_stream_schedule(m, k, n, grid.rows, grid.cols, spec, dtype,
                                        detour=detour, **options)  # fmt: skip
    widths = np.diff(chunk_offsets(n, grid.rows))
    shares = [widths[ends <= cycles * stretch].sum() / n for stretch in (1, analytic / fast)]
    return float(shares[0]), float(shares[1])


def check_stop_at(stop_at) -> None:
    """A prefix needs two cycles or more (its pace is measured over its second half)."""
    if isinstance(stop_at, bool) or not isinstance(stop_at, int) or stop_at < 2:
        raise ConfigError(f"stop_at={stop_at!r} must be an integer >= 2")


def edge_wavelets(program: ProgramArrays, ports: np.ndarray) -> int:
    """Wavelets the ``ports``' programs send over the whole run."""
    start, end = program.task_start[ports].reshape(-1), program.task_end[ports].reshape(-1)
    rows = np.concatenate([np.zeros(0, np.int64), *map(np.arange, start, end)])
    ops, times = program.ops[rows], row_repeats(program)[rows]  # a loop's body each time
    sends = ops[:, K.C_CODE] == K.OP_SEND
    return int((ops[sends, K.C_N] * times[sends]).sum())


def _pace(cycles: list[int], shares: list[float], part: int) -> float | None:
    """Edge share a cycle over the last ``1 / part`` of the samples' cycles."""
    since = int(np.searchsorted(cycles, cycles[-1] * (1 - 1 / part)))
    span = cycles[-1] - cycles[since]
    return (shares[-1] - shares[since]) / span if span > 0 else None


def _projected(cycles: int, shares, pace) -> int | None:
    if not pace or pace <= 0:
        return None
    return round(cycles + (1 - shares[-1]) / pace)
