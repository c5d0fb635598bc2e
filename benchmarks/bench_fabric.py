"""Router-cycles per second of the cycle engine under uniform traffic.

Run: python benchmarks/bench_fabric.py [--sizes 32 128 512] [--cycles N] [--threads 1 2]
     [--loads 0.01 0.3 0.9] [--engine cpu|cuda] [--layout rows|router]
     [--launch auto|block|grid|wide] [--plain]
     [--out out/bench_fabric.json]
Load is given as a share of the uniform-traffic bisection bound 4/k flits/PE/cycle. Each run
lasts at least 3k cycles so that packets cross the mesh before the figures are taken. JIT
compile time is measured apart (a warm-up on a tiny mesh) and excluded from the figures.
``--engine cuda`` runs the CUDA kernels (fabric.cuda_engine) on the GPU; ``--threads`` then
does not apply. The figures include copying the state to the device and back; ``--layout``
picks the device arrays' layout (``cuda_engine.LAYOUTS``), ``--launch`` the kernel
(``cuda_engine.LAUNCHES``; auto picks by the mesh's size), and the kernels' registers and
local memory per thread (the compiled kernels' resource report) are printed.
``--plain`` also runs ``plain_mesh.py`` (a bare XY mesh kernel, one thread) on each size and
load right after the engine, as a yardstick that drifts with the machine as the engine does
(its accepted rate counts the whole run, warm-up included); with ``--engine cuda`` its GPU
twin ``plain_mesh_cuda.py`` (one launch a cycle), the yardstick of the GPU's targets.
"""

import argparse
import time

from plain_mesh import plain_rate
from wafersim.fabric.engine import ENGINES
from wafersim.fabric.precompile import warm_up
from wafersim.fabric.traffic import TrafficConfig, run_traffic
from wafersim.wafer.atomic import write_json
from wafersim.wafer.presets import preset

LOADS = (0.01, 0.30, 0.90)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 128, 512])
    parser.add_argument("--cycles", type=int, default=500)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--engine", choices=ENGINES, default="cpu")
    parser.add_argument("--loads", type=float, nargs="+", default=list(LOADS))
    parser.add_argument("--layout", default="rows", help="cuda: the device arrays' layout")
    parser.add_argument("--launch", default="auto", help="cuda: the kernel (auto: by size)")
    parser.add_argument("--plain", action="store_true", help="also time plain_mesh.py")
    parser.add_argument("--out", default="out/bench_fabric.json")
    args = parser.parse_args()
    threads_list = [1] if args.engine == "cuda" else args.threads
    plain = plain_rate
    if args.engine == "cuda":
        from plain_mesh_cuda import plain_rate_cuda
        from wafersim.fabric import cuda_engine

        cuda_engine.LAYOUT = args.layout
        cuda_engine.LAUNCH = args.launch
        plain = plain_rate_cuda
    t0 = time.perf_counter()
    warm_up(args.engine, programs=False)
    compile_s = time.perf_counter() - t0
    print(f"JIT warm-up (compile or cache load), engine {args.engine}: {compile_s:.1f} s")
    if args.engine == "cuda":
        print(f"layout {args.layout}, launch {args.launch}; {cuda_engine.resource_report()}")
    print(f"{'k':>5} {'load':>6} {'threads':>7} {'accepted':>9} {'M router-cycles/s':>18}")
    if args.plain:
        print("      (plain: plain_mesh.py, one thread, same size, load and cycles)")
    rows = []
    for k in args.sizes:
        for load in args.loads:
            for threads in threads_list:
                cycles = max(args.cycles, 3 * k)
                cfg = TrafficConfig(
                    width=k,
                    height=k,
                    rate=load * 4 / k,
                    cycles=cycles,
                    warmup=cycles // 5,
                    threads=threads,
                )
                r = run_traffic(cfg, preset("tiny"), engine=args.engine)
                rows.append(
                    {
                        "k": k,
                        "load_of_bisection": load,
                        "threads": threads,
                        "engine": args.engine,
                        "cycles": cycles,
                        "accepted_rate": r["accepted_rate"],
                        "router_cycles_per_s": r["router_cycles_per_s"],
                    }
                )
                print(
                    f"{k:5d} {load:6.2f} {threads:7d} {r['accepted_rate']:9.5f} "
                    f"{r['router_cycles_per_s'] / 1e6:18.2f}"
                )
            if args.plain:
                speed, accepted = plain(k, load * 4 / k, cycles)
                rows.append({"k": k, "load_of_bisection": load, "threads": 1, "engine": "plain",
                             "cycles": cycles, "accepted_rate": accepted,
                             "router_cycles_per_s": speed})  # fmt: skip
                print(f"{k:5d} {load:6.2f} {'plain':>7} {accepted:9.5f} {speed / 1e6:18.2f}")
    summary = {"min_cycles": args.cycles, "engine": args.engine, "compile_s": compile_s}
    if args.engine == "cuda":
        summary |= {"layout": args.layout, "launch": args.launch}
    write_json(args.out, summary | {"runs": rows})
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
