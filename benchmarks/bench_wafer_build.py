"""Time and memory to build the plan of a whole-wafer weight-streaming GEMM, or of a share of it.

Run: python benchmarks/bench_wafer_build.py [--fractions 0.25] [--seed 0]
     [--out out/bench_wafer_build.json]

The case is docs/benchmarks.md's "A whole-wafer layer at cycle level": GPT-3 175B's QKV
projection (m = 2,048, k = 12,288, n = 36,864, fp16) on all 750 x 994 PEs of ``wse2`` with
1 defect/cm^2 and 4 spare rows, built as ``wafersim kernel ... --stop-at`` builds it (its
operands drawn, then every PE's program, route and SRAM word; nothing simulated). Each
``--fractions`` point takes that share of the wafer's PEs (each side scaled by its square
root) with each PE's work unchanged: ``m``, ``k`` and ``n`` scaled with the grid, so the
tiles, the chunks' width and the chunks per row are the wafer's, and the defect density too;
``--fractions 1`` builds the whole wafer (about 2 GB). Each point runs in a process of its
own (its peak resident memory is its own); with two points or more, a power law through the
last two extrapolates to the whole wafer, a check of how the build scales.
"""

import argparse
import json
import math
import resource
import subprocess
import sys
import time

from wafersim.wafer.atomic import write_json

WAFER = {"cols": 750, "rows": 994, "m": 2048, "k": 12288, "n": 36864}  # the doc's case
DEFECTS_PER_CM2, SPARE_ROWS = 1.0, 4


def scaled(fraction: float) -> dict[str, int]:
    """Grid and GEMM of ``fraction`` of the wafer's PEs, each PE's work the wafer's."""
    side = math.sqrt(fraction)
    cols, rows = round(WAFER["cols"] * side), round(WAFER["rows"] * side)
    return {
        "cols": cols,
        "rows": rows,
        "m": round(WAFER["m"] * cols / WAFER["cols"]),
        "k": round(WAFER["k"] * rows / WAFER["rows"]),
        "n": round(WAFER["n"] * rows / WAFER["rows"]),
    }


def build(fraction: float, seed: int) -> dict:
    """Build the plan of ``fraction`` of the wafer in this process; its figures."""
    from wafersim.kernels.kernel_plan import recorded
    from wafersim.kernels.registry import run_kernel

    from wafersim.commands.kernel import _placed
    from wafersim.commands.options import spec_from
    from wafersim.commands.parser import parse_command_line

    case = scaled(fraction)
    argv = (f"kernel gemm --grid {case['cols']}x{case['rows']} --dtype fp16 --seed {seed} "
            f"--defect-density-per-cm2 {DEFECTS_PER_CM2} --spare-rows {SPARE_ROWS}")  # fmt: skip
    args = parse_command_line(argv.split())
    spec = spec_from(args)
    grid, hole = _placed(args, case["rows"], case["cols"], spec)
    shape = {d: case[d] for d in "mkn"}
    start_rss = _peak_rss_mb()
    wall, cpu = time.perf_counter(), time.process_time()
    record = recorded(run_kernel, "gemm", "weight_stream", shape, grid, spec, "fp16", seed)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "fraction": fraction,
        **case,
        "holes": int(hole.sum()) if hole is not None else 0,
        "ops": len(record.program.ops),
        "sram_words": int(record.memory.sizes.sum()),
        "sram_words_loaded": int(record.memory.flat.size),  # what the plan holds
        "build_s": wall,
        "build_cpu_s": cpu,
        "peak_rss_mb": _peak_rss_mb(),
        "rss_before_build_mb": start_rss,
    }


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def extrapolate(points: list[dict], key: str) -> float:
    """``key`` at the whole wafer by a power law of the fraction through the last two points."""
    a, b = points[-2], points[-1]
    power = math.log(b[key] / a[key]) / math.log(b["fraction"] / a["fraction"])
    return b[key] * (1 / b["fraction"]) ** power


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.25],
                        help="shares of the wafer's PEs, in (0, 1] (default 0.25)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="out/bench_wafer_build.json")
    parser.add_argument("--one", type=float, help=argparse.SUPPRESS)  # a point's own process
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(build(args.one, args.seed)))
        return
    if not all(0 < f <= 1 for f in args.fractions):
        parser.error(f"--fractions {args.fractions}: each must be in (0, 1]")
    points = [_run_point(f, args.seed) for f in sorted(args.fractions)]
    summary = {"points": points}
    if len(points) >= 2:
        summary["whole_wafer_extrapolated"] = {
            key: extrapolate(points, key) for key in ("build_s", "build_cpu_s", "peak_rss_mb")
        }
        whole = summary["whole_wafer_extrapolated"]
        print(f"whole wafer (a power law through the last two points): build "
              f"{whole['build_s']:.0f} s ({whole['build_cpu_s']:.0f} s CPU), peak "
              f"{whole['peak_rss_mb']:,.0f} MB")  # fmt: skip
    write_json(args.out, summary)
    print(f"wrote {args.out}")


def _run_point(fraction: float, seed: int) -> dict:
    """One point in a process of its own; prints its line."""
    command = [sys.executable, __file__, "--one", str(fraction), "--seed", str(seed)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    point = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{point['fraction']:g} of the wafer: {point['cols']} x {point['rows']} PEs "
          f"(m={point['m']} k={point['k']} n={point['n']}, {point['holes']} holes): "
          f"{point['ops']:,} ops, {point['sram_words']:,} SRAM words; build "
          f"{point['build_s']:.1f} s ({point['build_cpu_s']:.1f} s CPU), peak "
          f"{point['peak_rss_mb']:,.0f} MB ({point['rss_before_build_mb']:,.0f} MB before)",
          flush=True)  # fmt: skip
    return point


if __name__ == "__main__":
    main()
