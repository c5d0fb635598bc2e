"""One line's all-to-all, the 3D FFT's transpose: relays at every PE against express relays.

Run: python benchmarks/bench_fft_lines.py [--sizes 64 128 256 512] [--strides 2 3 4]

Each size n runs one 1 x n line of ``wse2`` PEs on the cycle engine: the relays
(``kernels.fft.run_line``: every value through every PE's ramp on its way) and the express
relays (``kernels.fft_express.run_express_line``: a relay every ``stride`` PEs, the routers
between forwarding and handing out blocks with counter filters), each value checked at its
place. It prints each one's cycles, their ratio to the relays', and the middle link's load
one way (``n^2 / 4`` values of two words), which no all-to-all within the line beats.
"""

import argparse
import time

from wafersim.kernels.fft import run_line
from wafersim.kernels.fft_express import run_express_line
from wafersim.wafer.presets import preset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256, 512])
    parser.add_argument("--strides", type=int, nargs="+", default=[2, 3, 4])
    args = parser.parse_args()
    spec = preset("wse2")
    print(f"{'n':>5} {'design':>10} {'cycles':>9} {'vs relays':>10} {'vs link':>8} {'wall s':>7}")
    for n in args.sizes:
        bound = n * n // 2  # n^2 / 4 values a way over the middle link, two words each
        start = time.perf_counter()
        relays = run_line(n, spec)
        wall = time.perf_counter() - start
        print(f"{n:>5} {'relays':>10} {relays:>9,} {1:>10.3f} {relays / bound:>8.2f} {wall:>7.1f}")
        for stride in args.strides:
            if stride >= n:
                continue
            start = time.perf_counter()
            cycles, exact = run_express_line(n, stride, spec)
            wall = time.perf_counter() - start
            if not exact:
                raise SystemExit(f"express stride {stride} at n={n}: a value landed wrong")
            name = f"express {stride}"
            print(f"{n:>5} {name:>10} {cycles:>9,} {cycles / relays:>10.3f} "
                  f"{cycles / bound:>8.2f} {wall:>7.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
