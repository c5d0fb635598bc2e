"""The same cases through the analytic, fast and cycle tiers: each tier's error against the
cycle engine; and the compiler's estimates of GEMMs it places on patches with holes against
the engine running them where they are placed.

Tiers: every GEMM algorithm at m = k = n = 512 (fp32) on 16x16 to 64x64 grids, weight
streaming on a patch with dead PEs, and whole training steps of the digits perceptron
(`examples/fc_digits.yaml`, its 16 x 16 wafer with defects) timed by each tier.

Placed: m = k = n = 512 (fp32) on a 32 x 32 and a 64 x 64 patch (the wse2 PE, no
spare rows) with 0, 1, 3 and 10 % of its PEs dead (a Poisson map, dead wires included, no
repair), placed by the compiler over every working PE, once per strategy: the compiler's
kernel cycles against the engine's, for each strategy and for the one the compiler picks.

Run: python benchmarks/bench_fidelity.py [--quick] [--only tiers|placed] [--out FILE]
Targets: fast tier within 10 % of the cycle tier, analytic within 25 %; the compiler
within 10 % of the engine on holed patches.
"""

import argparse
import tempfile
import time
from pathlib import Path

from wafersim.compiler.single_gemm import place_single_gemm, run_placed_gemm
from wafersim.compiler.strategies import all_strategies
from wafersim.kernels.fast_tier import fast_cycles, grid_with_holes
from wafersim.kernels.registry import analytic_cycles, run_kernel
from wafersim.memoryx.report import performance
from wafersim.memoryx.run import run
from wafersim.memoryx.run_config import load_run_config
from wafersim.wafer.atomic import write_json
from wafersim.wafer.defects import generate
from wafersim.wafer.presets import preset
from wafersim.wafer.repair import repair

ROOT = Path(__file__).resolve().parents[1]
SHAPE = {"m": 512, "k": 512, "n": 512}
ALGOS = ("weight_stream", "summa", "cannon_interleaved", "systolic")
HOLE_FRACTION = 0.02
PLACED_FRACTIONS = (0.0, 0.01, 0.03, 0.10)
PLACED_SEED = 1


def gemm_case(algo, side, spec, holes=0.0):
    """One kernel on the engine, and its analytic and fast estimates."""
    grid = grid_with_holes(side, side, holes, seed=1)
    start = time.perf_counter()
    cycle = run_kernel("gemm", algo, SHAPE, grid, spec, "fp32").cycles
    cycle_s = time.perf_counter() - start
    fast = fast_cycles(algo, SHAPE, side, side, spec, "fp32", holes)
    analytic = analytic_cycles("gemm", algo, SHAPE, side, side, spec, "fp32", detour=grid.detour)
    name = f"gemm {algo} 512^3 {side}x{side}" + (f" {holes:.0%} dead" if holes else "")
    return _row(name, cycle, fast.cycles, analytic, cycle_s, fast.wall_s)


def run_case(steps):
    """A training run of the digits perceptron, timed by each tier (the wafer's simulated
    seconds: the digits' input pipeline, the same model on every tier, can bound the run)."""
    times, walls = {}, {}
    for tier in ("cycle", "fast", "analytic"):
        config = load_run_config(ROOT / "examples/fc_digits.yaml", {"steps": steps, "tier": tier})
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            times[tier] = performance(run(config, Path(tmp)))["wafer_time_s"]  # not input
            walls[tier] = time.perf_counter() - start
    name = f"run fc_digits {steps} steps (16x16, defects)"
    return _row(name, times["cycle"], times["fast"], times["analytic"], walls["cycle"],
                walls["fast"])  # fmt: skip


def _row(name, cycle, fast, analytic, cycle_s, fast_s):
    return {"case": name, "cycle": cycle, "fast": fast, "analytic": analytic,
            "fast_error": fast / cycle - 1, "analytic_error": analytic / cycle - 1,
            "cycle_wall_s": cycle_s, "fast_wall_s": fast_s}  # fmt: skip


def placed_cases(side: int, fraction: float) -> list[dict]:
    """Every strategy's placement of SHAPE on a ``side x side`` patch with ``fraction`` of
    its PEs dead: compiler cycles against the engine's; ``picked`` marks the compiler's
    choice among all of them."""
    spec = preset("wse2").replace(
        {"logical_width_pes": side, "logical_height_pes": side, "spare_rows": 0}
    )
    defects = None
    if fraction:
        drawn = generate(spec, "poisson", PLACED_SEED, pe_defect_prob=fraction)
        defects = repair(drawn, "none")
    best, _ = place_single_gemm(SHAPE, spec, "fp32", defects)
    rows = []
    for name in all_strategies():
        placed, working = place_single_gemm(SHAPE, spec, "fp32", defects, [name])
        start = time.perf_counter()
        result = run_placed_gemm(placed, working, spec, "fp32")
        rows.append({
            "side": side, "dead_fraction": fraction, "strategy": name,
            "picked": placed.strategy == best.strategy, "grid": list(placed.rows_cols),
            "orientation": placed.orientation.value, "holes": working.holes,
            "working_pes": working.working_pes, "pes": placed.pes,
            "compiler": placed.kernel_cycles, "engine": result.cycles,
            "error": placed.kernel_cycles / result.cycles - 1,
            "max_abs_error": result.max_abs_error,
            "wall_s": time.perf_counter() - start,
        })  # fmt: skip
    return rows


def print_placed(rows: list[dict]) -> dict:
    print(f"{'patch':>7} {'dead':>5} {'strategy':20} {'grid':>8} {'edge':6} {'compiler':>9} "
          f"{'engine':>9} {'error':>7}  wall")  # fmt: skip
    for r in rows:
        mark = "*" if r["picked"] else " "
        grid = "x".join(map(str, r["grid"]))
        print(f"{r['side']:>4}^2 {r['dead_fraction']:>5.0%} {r['strategy']:20}{mark}{grid:>8} "
              f"{r['orientation'][:5]:6} {r['compiler']:>9} {r['engine']:>9} "
              f"{r['error']:>+7.1%}  {r['wall_s']:.0f} s")  # fmt: skip
    worst = {
        "picked": max(abs(r["error"]) for r in rows if r["picked"]),
        "all": max(abs(r["error"]) for r in rows),
    }
    print(f"worst: compiler's picks {worst['picked']:.1%}, all strategies {worst['all']:.1%} "
          "(target 10 %; * the compiler's pick)")  # fmt: skip
    return worst


def print_tiers(rows: list[dict]) -> dict:
    print(f"{'case':48} {'cycle':>10} {'fast':>8} {'analytic':>8}  wall cycle/fast")
    for r in rows:
        walls = f"{r['cycle_wall_s']:.1f} s / {r['fast_wall_s']:.1f} s"
        errors = f"{r['fast_error']:>+8.1%} {r['analytic_error']:>+8.1%}"
        print(f"{r['case']:48} {r['cycle']:>10.4g} {errors}  {walls}")
    worst = {t: max(abs(r[f"{t}_error"]) for r in rows) for t in ("fast", "analytic")}
    print(f"worst: fast {worst['fast']:.1%} (target 10 %), analytic {worst['analytic']:.1%} "
          "(target 25 %)")  # fmt: skip
    return worst


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="16x16 and 32x32 only")
    parser.add_argument("--only", choices=["tiers", "placed"], help="one part only")
    parser.add_argument("--out", default="out/bench_fidelity.json")
    args = parser.parse_args()
    spec = preset("wse2")
    sides = (16, 32) if args.quick else (16, 32, 64)
    out = {}
    if args.only != "placed":
        rows = [gemm_case(algo, side, spec) for side in sides for algo in ALGOS]
        rows.append(gemm_case("weight_stream", 32, spec, HOLE_FRACTION))
        rows.append(run_case(steps=2))
        out.update(rows=rows, worst=print_tiers(rows))
    if args.only != "tiers":
        placed = [row for side in sides[1:] for fraction in PLACED_FRACTIONS
                  for row in placed_cases(side, fraction)]  # fmt: skip
        out.update(placed=placed, placed_worst=print_placed(placed))
    write_json(args.out, out)


if __name__ == "__main__":
    main()
