"""What a kernel run reports: the fields of ``wafersim kernel --json``, from a finished run."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from wafersim.fabric.engine import REASON_NAMES, SimResult
from wafersim.fabric.program import fmac_events
from wafersim.kernels.kernel_plan import KernelPlan
from wafersim.wafer.dtypes import HALF_DTYPES, DType
from wafersim.wafer.energy import EnergySplit, Events, energy
from wafersim.wafer.spec import WaferSpec

MAX_CYCLES_FACTOR = 4  # engine budget: this many times the analytic estimate ...
MAX_CYCLES_SLACK = 10_000  # ... plus this many cycles


@dataclass(frozen=True)
class KernelResult:
    """One kernel run; ``output`` is the result matrix/vector as numpy assembled it back."""

    kernel: str
    algo: str
    dtype: DType
    shape: dict[str, int]
    grid: tuple[int, int]
    cycles: int
    seconds: float
    flops: int
    utilization: float
    analytic_cycles: int
    max_abs_error: float
    link_utilization_max: float
    colors_used: int
    sram_peak_bytes: int
    sim_wall_s: float
    wavelet_hops: int  # wavelets times the links each crossed, ports' links included
    energy: EnergySplit  # the multiply-adds, their SRAM and leakage, and the hops
    patch_working_pes: int  # working PEs of the wafer patch the kernel ran on (ports left out)
    output: np.ndarray = field(repr=False)
    pe_busy_cycles: np.ndarray = field(repr=False)  # int64 (rows, cols) of the wafer patch
    # int64 (rows, cols, 5): each PE's cycles by reason (fabric.engine.REASON_NAMES)
    pe_cycle_reasons: np.ndarray | None = field(default=None, repr=False)

    @property
    def pe_cycles_by_reason(self) -> dict[str, int] | None:
        """PE-cycles of the patch by reason (``fabric.engine.REASON_NAMES``), the totals of
        :attr:`pe_cycle_reasons` and the summary's key of that name; None where the engine
        counted none."""
        if self.pe_cycle_reasons is None:
            return None
        totals = self.pe_cycle_reasons.sum(axis=(0, 1))
        return dict(zip(REASON_NAMES, map(int, totals), strict=True))

    def summary(self) -> dict:
        """JSON-ready fields (everything but the arrays)."""
        arrays = ("output", "pe_busy_cycles", "pe_cycle_reasons")
        out = {k: v for k, v in self.__dict__.items() if k not in arrays}
        out["grid"] = list(self.grid)
        out["energy"] = self.energy.to_dict()
        # task-cycles (two tasks at once count twice), over the patch's PEs
        out["busy_task_cycles"] = int(self.pe_busy_cycles.sum())
        if self.pe_cycles_by_reason is not None:
            out["pe_cycles_by_reason"] = self.pe_cycles_by_reason
        return out


def max_cycles_for(analytic: int) -> int:
    """The engine's cycle budget for a kernel whose analytic estimate is ``analytic``."""
    return MAX_CYCLES_FACTOR * int(analytic) + MAX_CYCLES_SLACK


def peak_flops_per_cycle(spec: WaferSpec, dtype: DType) -> int:
    """FLOPs one PE can do per cycle (a multiply-add is two)."""
    rate = spec.pe.fp16_fmac_per_cycle if dtype in HALF_DTYPES else spec.pe.fp32_fmac_per_cycle
    return 2 * rate


def kernel_result(
    *,
    kernel: str,
    algo: str,
    dtype: DType,
    shape: dict[str, int],
    plan: KernelPlan,
    sim: SimResult,
    flops: int,
    analytic: int,
    output: np.ndarray,
    expected: np.ndarray,
) -> KernelResult:
    """Collect the report of a finished run (utilization over the grid's PEs)."""
    grid = plan.grid
    pes = grid.rows * grid.cols
    cycles = max(1, sim.cycles)
    peak = pes * peak_flops_per_cycle(plan.spec, dtype) * cycles
    wafer_links = sim.link_flits[1:, 1:, :4]  # ports excluded
    hops = int(sim.link_flits[..., :4].sum())
    events = fmac_events(flops / 2, dtype) + Events(wavelet_hops=hops)
    return KernelResult(
        kernel=kernel,
        algo=algo,
        dtype=dtype,
        shape=shape,
        grid=(grid.rows, grid.cols),
        cycles=sim.cycles,
        seconds=sim.cycles / plan.spec.clock_hz,
        flops=int(flops),
        utilization=flops / peak,
        analytic_cycles=int(analytic),
        max_abs_error=float(np.max(np.abs(output - expected), initial=0.0)),
        link_utilization_max=float(wafer_links.max(initial=0) / cycles),
        colors_used=len(plan.wiring.colors_used),
        sram_peak_bytes=plan.sram_peak_bytes(),
        sim_wall_s=sim.sim_wall_s,
        wavelet_hops=hops,
        energy=energy(events, plan.spec, pe_seconds=pes * sim.cycles / plan.spec.clock_hz),
        patch_working_pes=int(grid.mesh.alive[1:, 1:].sum()),  # the port frame left out
        output=output,
        pe_busy_cycles=sim.pe_busy_cycles[1:, 1:],  # the port frame left out
        pe_cycle_reasons=None if sim.pe_cycle_reasons is None else sim.pe_cycle_reasons[1:, 1:],
    )


def p2p_cycles(spec: WaferSpec, hops: int, n_words: int) -> int:
    """One stream of ``n_words`` over ``hops``: op startup, injection, flight, the words."""
    return spec.pe.op_startup_cycles + 1 + hops * spec.link.hop_latency_cycles + n_words
