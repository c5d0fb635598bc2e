"""The fidelity tiers behind one interface, chosen by name: a kernel's cycles on a grid.

- ``cycle``: the kernel runs on the cycle engine with inputs drawn from the seed; its output
  is checked against numpy (the ground truth).
- ``fast`` (GEMMs): engine runs on two reduced grids with the same tile per PE and share of
  holes, scaled to the full grid (:mod:`kernels.fast_tier`).
- ``analytic``: the closed-form cost the compiler searches with, with the detours of the
  grid's holes (GEMMs) or each PE's place on it (GEMV); it refuses stencils and
  collectives on a patch with holes, which its costs do not know.

Every tier refuses, with the same line and before any work, what none can run: a grid
larger than the wafer, or a PE's share beyond its SRAM (:func:`kernels.registry.check_fits`).

>>> from wafersim.kernels.grid import kernel_grid
>>> from wafersim.wafer.presets import preset
>>> shape, grid, spec = {"m": 64, "k": 64, "n": 64}, kernel_grid(4, 4), preset("tiny")
>>> [estimate("gemm", "summa", shape, grid, spec, tier).tier for tier in TIERS]
['cycle', 'fast', 'analytic']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from wafersim.fabric.engine import ENGINE_IN_USE, engine_used
from wafersim.fabric.program import fmac_events
from wafersim.kernels.gemm_shape import GemmShape
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.prefix import Prefix, check_stop_at, run_prefix
from wafersim.kernels.registry import (
    algorithm,
    analytic_cycles,
    check_fits,
    check_placed,
    run_kernel,
)
from wafersim.kernels.result import KernelResult
from wafersim.wafer.dtypes import DType
from wafersim.wafer.energy import Events, energy
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec


@dataclass(frozen=True)
class Estimate:
    """A kernel's cycles by one tier, and what the tier adds: the engine run's result
    (``cycle``) or the fit and its reduced runs (``fast``)."""

    tier: str
    kernel: str
    algo: str
    dtype: DType
    shape: dict[str, int]
    cycles: int | None  # None: a prefix (stop_at) that set no pace
    seconds: float | None
    analytic_cycles: int
    run: KernelResult | None = field(default=None, repr=False)  # the cycle tier's run
    fit: dict[str, Any] | None = None  # the fast tier's fit: a, b, units, reduced runs
    energy: dict[str, float] | None = None  # a GEMM's split (:func:`gemm_energy`)
    prefix: Prefix | None = None  # the cycle tier's first cycles of a long run (stop_at)

    def summary(self) -> dict[str, Any]:
        """JSON-ready fields (an engine run's own summary for the cycle tier)."""
        if self.run is not None:
            return {**self.run.summary(), "tier": self.tier}
        out = asdict(self)
        del out["run"]
        for key in ("fit", "energy", "prefix"):
            if out[key] is None:
                del out[key]
        if self.prefix is not None:
            out["prefix"] = self.prefix.summary()
        return out


def gemm_energy(algo: str, shape: GemmShape, grid: KernelGrid, spec: WaferSpec, dtype: DType,
                cycles: int, options: dict) -> dict[str, float]:  # fmt: skip
    """A GEMM's energy split without an engine run: its multiply-adds (the kept weights' at
    ``density``) and their SRAM words, its record's wavelet-hops (equal to the engine's:
    ``tests/test_energy.py``), leakage over ``cycles``."""
    density = options.get("density", 1.0)
    macs = shape.m * shape.k * shape.n * density
    hops = algorithm("gemm", algo).hops(shape, grid.rows, grid.cols, dtype, **options)
    pe_seconds = grid.rows * grid.cols * cycles / spec.clock_hz
    events = fmac_events(macs, dtype) + Events(wavelet_hops=hops)
    return energy(events, spec, pe_seconds).to_dict()


Request = tuple[str, str, dict[str, int], KernelGrid, WaferSpec]  # kernel, algo, shape, grid, spec


def _cycle(req: Request, dtype, seed, engine, holes, options, stop_at=None) -> Estimate:
    kernel, algo, shape, grid, spec = req
    if stop_at is not None:
        with engine_used(engine):
            p = run_prefix(kernel, algo, shape, grid, spec, dtype, seed, stop_at, holes, **options)
        # None: the prefix set no steady pace (its projection is in ``prefix``, flagged)
        cycles = p.projected_cycles if p.steady else None
        seconds = None if cycles is None else cycles / spec.clock_hz
        return Estimate("cycle", kernel, algo, dtype, shape, cycles, seconds, p.analytic_cycles,
                        prefix=p)  # fmt: skip
    with engine_used(engine):
        result = run_kernel(kernel, algo, shape, grid, spec, dtype, seed, **options)
    return Estimate("cycle", kernel, algo, dtype, shape, result.cycles, result.seconds,
                    result.analytic_cycles, run=result)  # fmt: skip


def _fast(req: Request, dtype, seed, engine, holes, options) -> Estimate:
    from wafersim.kernels.fast_tier import fast_cycles

    kernel, algo, shape, grid, spec = req
    with engine_used(engine):
        fast = fast_cycles(algo, shape, grid.rows, grid.cols, spec, dtype, holes, seed, **options)
    fit = {"a": fast.fit[0], "b": fast.fit[1], "units": fast.units, "reduced_runs": fast.reduced}
    split = gemm_energy(algo, GemmShape.of(shape), grid, spec, dtype, fast.cycles, options)
    return Estimate("fast", kernel, algo, dtype, shape, fast.cycles, fast.cycles / spec.clock_hz,
                    fast.analytic_cycles, fit=fit, energy=split)  # fmt: skip


def _analytic(req: Request, dtype, seed, engine, holes, options) -> Estimate:
    kernel, algo, shape, grid, spec = req
    if kernel == "gemm":
        tree = options.get("reduce") == "tree"  # tree reductions crowd the detours' links
        options = {**options, "detour": grid.tree_detour if tree else grid.detour}
    elif kernel == "gemv":
        options = {**options, "grid": grid}  # its holes' detours, shared ports and links
    cycles = analytic_cycles(kernel, algo, shape, grid.rows, grid.cols, spec, dtype, **options)
    options.pop("detour", None)
    options.pop("grid", None)
    split = (
        gemm_energy(algo, GemmShape.of(shape), grid, spec, dtype, cycles, options)
        if kernel == "gemm"
        else None
    )
    return Estimate("analytic", kernel, algo, dtype, shape, cycles, cycles / spec.clock_hz, cycles,
                    energy=split)  # fmt: skip


HOLE_AWARE = ("gemm", "gemv")  # kernels whose analytic cost reads the grid's holes


def check_tier(kernel: str, tier: str, grid: KernelGrid | None = None) -> None:
    """ConfigError for a tier that has no estimate of ``kernel`` (on ``grid``): the fast
    tier runs GEMMs only, and the analytic costs of stencils and collectives know no holes
    (GEMMs' take their detours, GEMV's its placement), so they would answer for a clean
    patch."""
    if tier == "fast" and kernel != "gemm":
        raise ConfigError(f"tier='fast' estimates GEMMs only, not {kernel}")
    if tier == "analytic" and kernel not in HOLE_AWARE and grid is not None and not grid.clean:
        raise ConfigError(
            f"tier='analytic' estimates {kernel} on a patch without holes, and this one has "
            "holes, dead wires or stretched links where the kernel runs: use tier='cycle'"
        )


TIERS: dict[str, Callable[..., Estimate]] = {"cycle": _cycle, "fast": _fast, "analytic": _analytic}


def check_request(
    kernel: str, algo: str, tier: str, engine: str, options: dict, stop_at: int | None = None
) -> None:
    """ConfigError, before any work, for what :func:`estimate` cannot be asked: an unknown
    tier or algorithm, an engine for the analytic tier (which runs none), an option the
    algorithm does not take, ``stop_at`` other than the cycle tier's."""
    if tier not in TIERS:
        raise ConfigError(f"tier={tier!r} is not one of: {', '.join(TIERS)}")
    if stop_at is not None:
        check_stop_at(stop_at)
        if tier != "cycle":
            raise ConfigError(f"stop_at stops the cycle tier's engine run: tier='cycle', not "
                              f"{tier!r}")  # fmt: skip
    accepted = algorithm(kernel, algo).option_names
    if tier == "analytic" and engine != "cpu":
        raise ConfigError(f"engine={engine!r} runs the cycle and fast tiers; analytic runs none")
    for name, value in options.items():
        if name not in accepted:
            raise ConfigError(
                f"{name}={value!r} does not apply to {kernel} {algo}; its options: "
                f"{', '.join(accepted) or 'none'}"
            )


def estimate(
    kernel: str,
    algo: str,
    shape: dict[str, int],
    grid: KernelGrid,
    spec: WaferSpec,
    tier: str = "cycle",
    dtype: DType = "fp32",
    seed: int = 0,
    engine: str | None = None,
    hole_fraction: float = 0.0,
    stop_at: int | None = None,
    **options,
) -> Estimate:
    """``kernel``/``algo`` on ``grid`` by the tier named ``tier`` (``hole_fraction``: the
    share of dead PEs the fast tier gives its reduced grids; ``engine``: where the cycle
    and fast tiers run the engine, None: the one in use, ``fabric.engine.engine_used``;
    ``stop_at``: the cycle tier simulates that many cycles of a run too long to finish and
    projects the rest at their pace, :mod:`kernels.prefix`). What no tier can run, or
    this one cannot estimate, is refused first with one line, the same from every tier
    (:func:`kernels.registry.check_fits`, :func:`kernels.registry.check_placed`,
    :func:`check_tier`)."""
    engine = engine or ENGINE_IN_USE.get()
    check_request(kernel, algo, tier, engine, options, stop_at)
    check_fits(kernel, algo, shape, grid.rows, grid.cols, spec, dtype, options)
    check_placed(grid, spec)
    check_tier(kernel, tier, grid)
    request = (kernel, algo, shape, grid, spec)
    if stop_at is not None:
        return _cycle(request, dtype, seed, engine, hole_fraction, options, stop_at)
    return TIERS[tier](request, dtype, seed, engine, hole_fraction, options)
