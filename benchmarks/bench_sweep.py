"""Points per second of a 1,000-point defect-tolerance sweep on `wse2`, serial and on Dask
LocalClusters of 1 and 2 workers.

Run: python benchmarks/bench_sweep.py [--points 1000] [--workers 1 2] [--rounds 3]
[--out out/bench_sweep.json]
Targets: the whole sweep in under 5 minutes on the 2-core development machine, and
at least 1.8x the points/s from the second worker. The Dask runs repeat ``--rounds`` times,
each round running every worker count once in turn, and the speedup is the median over
rounds of that round's ratio: a shared virtual machine's speed drifts by 10-30 % over a
minute, and back-to-back pairs see the same drift. Two rates per run: over the whole sweep
(cluster start-up and shut-down included, a fixed cost whatever the number of workers) and
steady (from the first finished batch to the last, what more points would add).
"""

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import yaml
from wafersim.wafer.atomic import write_json

from wafersim.sweeps.config import load_sweep
from wafersim.sweeps.run import run_sweep


def sweep_file(folder: Path, points: int) -> Path:
    """Random sampling over density, repair strategy and seed: every point a new map."""
    path = folder / "bench_sweep.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "job": "defects",
                "base": {"preset": "wse2", "model": "poisson"},
                "sampling": "random",
                "samples": points,
                "sample_seed": 0,
                "axes": {
                    "defect_density_per_cm2": {"loguniform": [0.01, 2.0]},
                    "repair": ["none", "row", "column_shift"],
                    "seed": {"integers": [0, 10**6]},
                },
                "metrics": ["working_pes", "unrepaired_pes", "unrepaired_links"],
            }
        )
    )
    return path


def run_once(sweep, folder: Path, name: str, **executor) -> dict:
    out = folder / f"{name}.h5"
    batches = []  # (seconds since start, points done)

    def progress(p):
        batches.append((time.perf_counter() - start, p.done))

    start = time.perf_counter()
    summary = run_sweep(sweep, out, progress=progress, **executor)
    wall = time.perf_counter() - start
    return {"executor": summary.executor, "ok": summary.ok, "failed": summary.failed,
            "wall_s": wall, "points_per_s": summary.ran / wall,
            "steady_points_per_s": steady_rate(batches)}  # fmt: skip


def steady_rate(batches: list[tuple[float, int]]) -> float | None:
    """Points/s from the first batch of finished points to the last (None with one)."""
    finished = [b for b in batches if b[1] > 0]
    if len(finished) < 2 or finished[-1][0] <= finished[0][0]:
        return None
    (t0, done0), (t1, done1) = finished[0], finished[-1]
    return (done1 - done0) / (t1 - t0)


def rate(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def median_ratio(rounds: list[dict], key: str) -> tuple[float | None, list[float]]:
    ratios = [runs[2][key] / runs[1][key] for runs in rounds if runs[1][key] and runs[2][key]]
    return (statistics.median(ratios) if ratios else None), ratios


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="out/bench_sweep.json")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds={args.rounds} must be >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        sweep = load_sweep(sweep_file(folder, args.points))
        results = {"cores": os.cpu_count(), "points": args.points}
        results["serial"] = run_once(sweep, folder, "serial", serial=True)
        print(f"serial: {results['serial']['points_per_s']:.1f} points/s, "
              f"{results['serial']['wall_s']:.1f} s")  # fmt: skip
        rounds = [
            {n: run_once(sweep, folder, f"dask{n}-{r}", workers=n) for n in args.workers}
            for r in range(args.rounds)
        ]
        for r, runs in enumerate(rounds):
            for n, run in runs.items():
                print(f"round {r + 1}, dask, {n} worker(s): {run['points_per_s']:.1f} points/s, "
                      f"{run['wall_s']:.1f} s; steady {rate(run['steady_points_per_s'])} "
                      "points/s")  # fmt: skip
        for n in args.workers:
            results[f"dask_{n}"] = [runs[n] for runs in rounds]
        if 1 in args.workers and 2 in args.workers:
            for label, key in (("whole sweep", "points_per_s"), ("steady", "steady_points_per_s")):
                median, ratios = median_ratio(rounds, key)
                results[f"second_worker_speedup_{key}"] = median
                results[f"second_worker_speedups_{key}"] = ratios
                print(f"second worker, {label}: {rate(median, 2)}x median of "
                      f"{', '.join(f'{x:.2f}' for x in ratios)} (target >= 1.8x)")  # fmt: skip
    write_json(args.out, results)


if __name__ == "__main__":
    main()
