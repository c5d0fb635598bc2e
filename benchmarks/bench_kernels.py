"""Kernel placement: utilization of each GEMM and GEMV algorithm vs grid size.

Run: python benchmarks/bench_kernels.py [--engine-sides 8 16 32 64]
     [--analytic-sides 8 16 32 64 128 256 512 750] [--size 512] [--analytic-size 4096]
     [--dtype fp32] [--out out/bench_kernels.json] [--plot out/bench_kernels.png]

Square P x P grids of the ``wse2`` PE. The cycle engine runs every algorithm at a fixed
problem (``--size``: m = k = n for GEMM, m = n for GEMV) on the engine sides and
prints its cycles beside the analytic estimate (the error column is analytic vs engine).
The analytic model alone then covers grids up to the wafer (750 x 750 for square-only
Cannon, 750 x 994 for the rest) at ``--analytic-size``. The PNG plots utilization (achieved
FLOP/s over the peak of the PEs used) against PEs per algorithm: engine points as markers,
the analytic model at the engine's size dotted, at the large size solid.
"""

import argparse
import time

from wafersim.fabric.precompile import warm_up
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.registry import KERNELS, analytic_cycles, run_kernel
from wafersim.kernels.result import peak_flops_per_cycle
from wafersim.wafer.atomic import atomic_path, write_json
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset

WAFER = (994, 750)  # wse2 logical grid, rows x columns (750 wide, 994 high) [presets]


def cases():
    return [("gemm", algo) for algo in KERNELS["gemm"]] + [
        ("gemv", algo) for algo in KERNELS["gemv"]
    ]


def shape(kernel, size):
    return {"m": size, "k": size, "n": size} if kernel == "gemm" else {"m": size, "n": size}


def flops(kernel, s):
    return 2 * s["m"] * s["n"] * (s["k"] if kernel == "gemm" else 1)


def engine_rows(args, spec):
    rows = []
    print(f"{'kernel':6} {'algo':18} {'grid':>7} {'cycles':>9} {'analytic':>9} {'err%':>6} "
          f"{'util%':>6} {'wall s':>7}")  # fmt: skip
    for kernel, algo in cases():
        for side in args.engine_sides:
            s = shape(kernel, args.size)
            try:
                r = run_kernel(kernel, algo, s, kernel_grid(side, side), spec, args.dtype)
            except ConfigError as error:  # a tile that does not fit the PE's SRAM
                print(f"{kernel:6} {algo:18} {side:>3}x{side:<3} does not fit: {error}")
                continue
            err = (r.analytic_cycles - r.cycles) / r.cycles
            rows.append({**r.summary(), "tier": "engine", "analytic_error": err})
            print(f"{kernel:6} {algo:18} {side:>3}x{side:<3} {r.cycles:9d} "
                  f"{r.analytic_cycles:9d} {100 * err:6.1f} {100 * r.utilization:6.1f} "
                  f"{r.sim_wall_s:7.2f}")  # fmt: skip
    return rows


def analytic_rows(args, spec):
    """The analytic model at ``--size`` on the engine sides (tier ``analytic@engine``, to
    compare with the engine points) and at ``--analytic-size`` up to the wafer."""
    rows = []
    print(f"\nanalytic, size {args.analytic_size}")
    runs = [("analytic@engine", args.size, side) for side in args.engine_sides]
    runs += [("analytic", args.analytic_size, side) for side in args.analytic_sides]
    for kernel, algo in cases():
        for tier, size, side in runs:
            grid = (side, side) if "cannon" in algo or side < min(WAFER) else WAFER
            s = shape(kernel, size)
            cycles = analytic_cycles(kernel, algo, s, *grid, spec, args.dtype)
            peak = grid[0] * grid[1] * peak_flops_per_cycle(spec, args.dtype) * cycles
            util = flops(kernel, s) / peak
            rows.append(
                {"tier": tier, "kernel": kernel, "algo": algo, "grid": list(grid),
                 "analytic_cycles": cycles, "utilization": util}
            )  # fmt: skip
            if tier == "analytic":
                print(f"{kernel:6} {algo:18} {grid[0]:>3}x{grid[1]:<3} {cycles:12d} "
                      f"{100 * util:6.2f}%")  # fmt: skip
    return rows


def plot(rows, path, args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=False)
    for ax, kernel in zip(axes, ("gemm", "gemv"), strict=True):
        for i, (k, algo) in enumerate(c for c in cases() if c[0] == kernel):
            color = f"C{i}"
            styles = (("analytic", "-"), ("analytic@engine", ":"), ("engine", "o"))
            for tier, style in styles:
                pts = [
                    r for r in rows if r["tier"] == tier and r["kernel"] == k and r["algo"] == algo
                ]
                xs = [r["grid"][0] * r["grid"][1] for r in pts]
                label = f"{algo} ({tier})"
                ax.plot(xs, [100 * r["utilization"] for r in pts], style, color=color, label=label)
        ax.set_xscale("log")
        ax.set_xlabel("PEs in the grid")
        ax.set_ylabel("utilization (% of peak FLOP/s of the PEs used)")
        ax.set_title(
            f"{kernel.upper()}: engine at size {args.size}, analytic at {args.analytic_size}"
        )
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine-sides", type=int, nargs="*", default=[8, 16, 32, 64])
    parser.add_argument("--analytic-sides", type=int, nargs="*",
                        default=[8, 16, 32, 64, 128, 256, 512, 750])  # fmt: skip
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--analytic-size", type=int, default=4096)
    parser.add_argument("--dtype", default="fp32", choices=["fp32", "fp16"])
    parser.add_argument("--out", default="out/bench_kernels.json")
    parser.add_argument("--plot", default="out/bench_kernels.png")
    args = parser.parse_args()
    spec = preset("wse2")
    t0 = time.perf_counter()
    warm_up(dtype=args.dtype)
    print(f"JIT warm-up (compile or cache load): {time.perf_counter() - t0:.1f} s")
    rows = engine_rows(args, spec) + analytic_rows(args, spec)
    write_json(args.out, {"spec": spec.name, "dtype": args.dtype, "size": args.size,
                          "analytic_size": args.analytic_size, "rows": rows})  # fmt: skip
    plot(rows, args.plot, args)
    print(f"saved {args.out} and {args.plot}")


if __name__ == "__main__":
    main()
