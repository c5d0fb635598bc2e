"""The CUDA engine's start-up with and without its disk cache of compiled kernels.

Run on a GPU machine: python benchmarks/cuda_jit_cache.py [--size 32] [--cycles 200]
Removes the cached CUDA kernels (``fabric/__pycache__/_cuda_kernels.*``), then runs the same
traffic job in fresh processes: once on the CPU engine (so that the CPU side's Numba cache is
warm for all that follow), then twice on the CUDA engine: the first compiles and saves the
kernels, the second loads them. Prints each process's wall time to its result and checks that
the three summaries agree number for number.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import json, time
start = time.perf_counter()
from wafersim.fabric.traffic import TrafficConfig, run_traffic
from wafersim.wafer.presets import preset
cfg = TrafficConfig(width={size}, height={size}, rate=0.3, cycles={cycles}, warmup=20, seed=1)
summary = run_traffic(cfg, preset("tiny"), engine="{engine}")
summary = {{k: v for k, v in summary.items() if k not in ("sim_wall_s", "router_cycles_per_s",
                                                           "engine", "wall_s")}}
print(json.dumps({{"wall_s": time.perf_counter() - start, "summary": summary}}))
"""


def child(engine: str, size: int, cycles: int) -> dict:
    code = CHILD.format(engine=engine, size=size, cycles=cycles)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--cycles", type=int, default=200)
    args = parser.parse_args()
    removed = 0
    for path in (ROOT / "fabric" / "__pycache__").glob("_cuda_kernels.*"):
        path.unlink()
        removed += 1
    print(f"removed {removed} cached CUDA kernel files")
    runs = {}
    for name, engine in (("cpu", "cpu"), ("cuda cold", "cuda"), ("cuda cached", "cuda")):
        start = time.perf_counter()
        runs[name] = child(engine, args.size, args.cycles)
        whole = time.perf_counter() - start
        print(
            f"{name:12} {runs[name]['wall_s']:7.1f} s to the result ({whole:.1f} s with the "
            "interpreter)",
            flush=True,
        )
    same = runs["cpu"]["summary"] == runs["cuda cold"]["summary"] == runs["cuda cached"]["summary"]
    cached = sorted(p.name for p in (ROOT / "fabric" / "__pycache__").glob("_cuda_kernels.*"))
    print(f"summaries equal: {same}; cache files: {', '.join(cached) or 'none'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
