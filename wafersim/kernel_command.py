"""``wafersim kernel``: run one kernel on the cycle engine and report it.

``--grid PxQ`` is P rows by Q columns of PEs. With defects, the kernel runs on a patch of
``P + --spare-rows`` rows whose dead PEs it skips column by column (routes detour).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from wafer import __version__
from wafer.config_io import parse_overrides, resolve_spec
from wafer.errors import ConfigError
from wafersim.jobs import Command

DEFAULT_KERNEL_PRESET = "wse2"


def add_kernel_arguments(parser: argparse.ArgumentParser) -> None:
    from kernels.registry import KERNELS

    parser.add_argument("kernel", choices=list(KERNELS), help="what to run")
    parser.add_argument("--algo", required=True, help="algorithm (see the docs per kernel)")
    for dim in ("m", "k", "n"):
        parser.add_argument(f"--{dim}", type=int, default=1, help=f"matrix dimension {dim}")
    parser.add_argument("--grid", default="8x8", help="PxQ: P rows by Q columns of PEs")
    parser.add_argument("--dtype", default="fp32", choices=["fp32", "fp16"])
    parser.add_argument("--preset", default=DEFAULT_KERNEL_PRESET, help="wafer preset")
    parser.add_argument("--spec", help="wafer spec file (.toml/.yaml)")
    parser.add_argument("--defect-density-per-cm2", type=float, help="random dead PEs/wires")
    parser.add_argument("--defects", help="defect map (.h5): its top-left patch is used")
    parser.add_argument("--spare-rows", type=int, default=1, help="rows kept for holes")
    parser.add_argument("--reduce", help="weight_stream partial-sum reduction: chain|tree")
    parser.add_argument("--scope", help="collectives: row|column|grid (default grid)")


def run_kernel_command(args: argparse.Namespace) -> dict[str, Any]:
    from kernels.grid import kernel_grid
    from kernels.registry import run_kernel, shape_of
    from wafersim.options import parse_grid

    rows, cols = parse_grid(args.grid)
    spec = resolve_spec(args.preset, args.spec, parse_overrides(args.overrides))
    shape = shape_of(args.kernel, args.m, args.k, args.n)
    dead_pe, dead_link = _patch(args, rows, cols, spec)
    grid = kernel_grid(rows, cols, dead_pe, dead_link)
    options = {k: v for k in ("reduce", "scope") if (v := getattr(args, k)) is not None}
    result = run_kernel(args.kernel, args.algo, shape, grid, spec, args.dtype, args.seed, **options)
    return {
        **result.summary(),
        "holes": int(dead_pe.sum()) if dead_pe is not None else 0,
        "spec": spec.name,
        "seed": args.seed,
        "wafersim_version": __version__,
    }


def _patch(args, rows: int, cols: int, spec) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Dead PE and wire masks of the kernel's patch, or (None, None) without defects."""
    from wafer.defects import DefectMap, generate

    if args.defects is None and args.defect_density_per_cm2 is None:
        return None, None
    if args.spare_rows < 0:
        raise ConfigError(f"--spare-rows={args.spare_rows} must be >= 0")
    height = rows + args.spare_rows
    if args.defects:
        defects = DefectMap.load(args.defects)
    else:
        patch = spec.replace(
            {"logical_width_pes": cols, "logical_height_pes": height, "spare_rows": 0}
        )
        density = args.defect_density_per_cm2
        defects = generate(patch, "poisson", args.seed, defect_density_per_cm2=density)
    if defects.dead_pe.shape[0] < height or defects.dead_pe.shape[1] < cols:
        raise ConfigError(
            f"defect map {defects.dead_pe.shape[1]}x{defects.dead_pe.shape[0]} is smaller "
            f"than the kernel patch {cols}x{height}"
        )
    return defects.dead_pe[:height, :cols], defects.dead_link[:height, :cols]


def kernel_text(r: dict[str, Any]) -> str:
    shape = " ".join(f"{k}={v}" for k, v in r["shape"].items())
    return "\n".join(
        [
            f"{r['kernel']} {r['algo']} {shape} {r['dtype']} on {r['grid'][0]}x{r['grid'][1]} "
            f"PEs ({r['holes']} holes), {r['spec']}",
            f"{r['cycles']} cycles ({r['seconds'] * 1e6:.1f} us), analytic "
            f"{r['analytic_cycles']}, utilization {r['utilization']:.1%}",
            f"max abs error {r['max_abs_error']:.3g}, colors {r['colors_used']}, "
            f"SRAM peak {r['sram_peak_bytes']} B, busiest link {r['link_utilization_max']:.2f}",
            f"simulated in {r['sim_wall_s']:.2f} s",
        ]
    )


COMMAND = Command(add_kernel_arguments, run_kernel_command, kernel_text)
