"""The engine's work as instructions executed, this checkout's and another's side by side: a
count that a shared machine's load does not move, where wall-time pairs on a 2-core VM differ
by half either way within an hour.

    python benchmarks/bench_engine_work.py --against ../old-checkout [--cases summa traffic]

Each case runs in child processes under Valgrind (``valgrind --tool=cachegrind
--cache-sim=no``), once simulating a recorded plan (or running synthetic traffic) once and
once three times: the difference is two runs' instructions, with the imports, the plan's
build and any compile taken out. ``NUMBA_CPU_NAME=generic`` and a Numba cache warmed by a
native run first give both checkouts the same machine code for the same source. It prints
each case's instructions a simulated cycle and the ratio to the other checkout. Needs
``valgrind`` on the PATH; a case takes one to three minutes a checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

GEMMS = ("summa", "cannon_naive", "weight_stream")  # 16 x 16 PEs, m = k = n = 128, fp32
CASES = (*GEMMS, "traffic")  # traffic: 32 x 32 routers, 30 % load, 400 cycles
REFS = re.compile(r"I\s+refs:\s+([\d,]+)")
# one thread everywhere: a pool's workers spin while they wait, a count that varies run to run
ONE_THREAD = {name: "1" for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS",
                                     "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}  # fmt: skip
COUNTER = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]


def run_case(case: str, reps: int) -> dict[str, int]:
    """In a child process: ``case`` run ``reps`` times; the cycles one run simulates."""
    from wafersim.wafer.presets import preset

    if case == "traffic":
        from wafersim.fabric.traffic import TrafficConfig, run_traffic

        config = TrafficConfig(width=32, height=32, rate=0.3 * 4 / 32, cycles=400, warmup=80)
        for _ in range(reps):
            run_traffic(config, preset("tiny"))
        return {"cycles": config.cycles}
    from wafersim.fabric.engine import simulate
    from wafersim.kernels.grid import kernel_grid
    from wafersim.kernels.kernel_plan import recorded
    from wafersim.kernels.registry import run_kernel

    spec, shape = preset("wse2"), {"m": 128, "k": 128, "n": 128}
    record = recorded(run_kernel, "gemm", case, shape, kernel_grid(16, 16), spec, "fp32", 0)
    for _ in range(reps):
        plan, limit = (record.routes, record.program, record.memory), record.max_cycles
        result = simulate(record.plan.grid.mesh, spec, *plan, max_cycles=limit, check_routes=False)
    return {"cycles": int(result.cycles)}


def instructions(checkout: Path, cache: Path, case: str) -> dict[str, float]:
    """Two runs' instructions of ``case`` in ``checkout``, and a run's cycles."""
    from bench_startup import import_path  # the parent's (a child runs with -P)

    where = {"PYTHONPATH": import_path(checkout), "NUMBA_CACHE_DIR": str(cache)}
    env = os.environ | ONE_THREAD | {"NUMBA_CPU_NAME": "generic"} | where
    child = [sys.executable, "-P", str(Path(__file__).resolve()), "--one", case]
    _child(child + ["1"], checkout, env)  # compiles into the cache, natively
    counts = []
    for reps in (1, 3):
        done = _child([*COUNTER, *child, str(reps)], checkout, env)
        counts.append(int(REFS.findall(done.stderr)[-1].replace(",", "")))
    cycles = json.loads(done.stdout.strip().splitlines()[-1])["cycles"]
    return {"instructions": counts[1] - counts[0], "cycles": cycles}


def _child(argv: list[str], checkout: Path, env: dict) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: {' '.join(argv[-2:])} failed: {done.stderr.strip()[-500:]}")
    return done


def _per_cycle(counted: dict[str, float]) -> float:
    return counted["instructions"] / counted["cycles"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="another checkout, counted side by side")
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--out", default="out/bench_engine_work.json")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # a child: CASE REPS
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_case(args.one[0], int(args.one[1]))))
        return
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not on the PATH: it counts the instructions")
    checkouts = {"this": Path(__file__).resolve().parents[1]}
    if args.against:
        checkouts["against"] = args.against.resolve()
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for label, checkout in checkouts.items():
            results[label] = {"checkout": str(checkout)}
            for case in args.cases:
                counted = instructions(checkout, Path(scratch) / label, case)
                results[label][case] = counted
                run, cycles = counted["instructions"] / 2, counted["cycles"]
                print(f"{label:8s} {case:14s} {run:,.0f} instructions a run, {cycles:,} "
                      f"cycles, {run / cycles:,.0f} a cycle", flush=True)  # fmt: skip
    if args.against:
        for case in args.cases:
            this, other = (results[k][case] for k in ("this", "against"))
            ratio = (this["instructions"] / this["cycles"]) / (
                other["instructions"] / other["cycles"]
            )
            print(f"{case:14s} {ratio:.3f}x the other checkout's instructions a simulated cycle")
    from wafersim.wafer.atomic import write_json

    write_json(args.out, results)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
