"""One CUDA-engine run per size under uniform traffic, for a profiler to read:

    ncu --kernel-name regex:run_cycles --launch-skip 3 python benchmarks/profile_cuda.py \
        [--sizes 128 1024] [--cycles 300] [--load 0.3] [--layout rows]

Each size is one kernel launch of ``--cycles`` cycles; the three launches before them compile
and warm the kernels on a tiny mesh (skip them in the profiler).
"""

import argparse

from wafersim.fabric import cuda_engine
from wafersim.fabric.traffic import TrafficConfig, run_traffic
from wafersim.wafer.presets import preset


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 1024])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--load", type=float, default=0.3, help="share of the bisection bound")
    parser.add_argument("--layout", default=cuda_engine.LAYOUT, choices=cuda_engine.LAYOUTS)
    args = parser.parse_args()
    cuda_engine.LAYOUT = args.layout
    for k in (4, 4, 4, *args.sizes):  # three warm-up launches on 4 x 4
        cfg = TrafficConfig(k, k, rate=args.load * 4 / k, cycles=args.cycles, warmup=0)
        r = run_traffic(cfg, preset("tiny"), engine="cuda")
        print(f"{k} x {k}: {r['router_cycles_per_s'] / 1e6:.1f} M router-cycles/s")  # noqa: T201


if __name__ == "__main__":
    main()
