"""Time to generate and repair one `wse2` defect map, per defect model and repair strategy.

Run: python benchmarks/bench_defects.py [--repeats N] [--out out/bench_defects.json]
Target: well under 0.5 s per map on one core, so 1,000-map studies take minutes.
Maps are timed as a study or sweep runs them: with freed memory kept (wafersim.sweeps.heap).
"""

import argparse
import statistics
import time

from wafersim.wafer.atomic import write_json
from wafersim.wafer.defects import generate
from wafersim.wafer.presets import preset
from wafersim.wafer.repair import REPAIR_STRATEGIES, repair, warm_up

from wafersim.sweeps.heap import keep_freed_memory

CASES = [
    ("poisson", {"defect_density_per_cm2": 0.1}),
    ("poisson", {"defect_density_per_cm2": 1.0}),
    ("clustered", {"defect_density_per_cm2": 1.0, "alpha": 2.0}),
    ("poisson", {"pe_defect_prob": 0.01}),
]


def time_case(spec, model, params, strategy, repeats):
    generate_s, repair_s = [], []
    for seed in range(repeats):
        t0 = time.perf_counter()
        defects = generate(spec, model, seed, **params)
        t1 = time.perf_counter()
        repair(defects, strategy)
        t2 = time.perf_counter()
        generate_s.append(t1 - t0)
        repair_s.append(t2 - t1)
    return statistics.median(generate_s), statistics.median(repair_s)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="out/bench_defects.json")
    args = parser.parse_args()
    keep_freed_memory()
    t0 = time.perf_counter()
    warm_up()
    print(f"JIT warm-up (compile or cache load): {time.perf_counter() - t0:.2f} s")
    spec = preset("wse2")
    rows = []
    print(
        f"{'model':10} {'params':38} {'repair':13} "
        f"{'generate s':>10} {'repair s':>9} {'total s':>8}"
    )
    for model, params in CASES:
        for strategy in REPAIR_STRATEGIES:
            gen, rep = time_case(spec, model, params, strategy, args.repeats)
            rows.append(
                {
                    "model": model,
                    "params": params,
                    "repair": strategy,
                    "generate_s": gen,
                    "repair_s": rep,
                    "total_s": gen + rep,
                }
            )
            print(
                f"{model:10} {str(params):38} {strategy:13} {gen:10.3f} {rep:9.3f} {gen + rep:8.3f}"
            )
    write_json(args.out, {"preset": "wse2", "repeats": args.repeats, "cases": rows})
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
