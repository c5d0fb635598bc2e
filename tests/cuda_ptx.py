"""The CUDA kernels compiled to PTX for an H100 (sm_90), on a machine without a GPU.

Numba's CUDA simulator runs the kernels as Python, so it accepts code that numba-cuda's
compiler refuses (a device function returning an array view it made itself, say: found on the
first real GPU). This compiles them for real, numba-cuda's typing and NVVM, with no driver:

    python tests/cuda_ptx.py

Needs numba-cuda (the ``cuda`` extra) and NVVM (a CUDA toolkit, or the ``nvidia-cuda-nvcc-cu12``
and ``nvidia-cuda-nvrtc-cu12`` wheels). Exits 0 when every kernel compiles and no float32
multiply-add is fused into an FMA (the CPU engine rounds the product and the sum apart), 1
otherwise, 3 when numba-cuda or NVVM is missing.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET = (9, 0)  # compute capability of the H100, the GPU the engine was measured on
FUSED = re.compile(r"\bfma\.[\w.]*f32\b")


def main() -> int:
    try:
        import numba_cuda  # noqa: F401 (numba's own CUDA target compiles these kernels wrongly)
        from numba.cuda import dispatcher
        from numba.cuda.cudadrv.nvvm import NVVM

        NVVM()
    except Exception as err:  # noqa: BLE001 (any missing piece means: cannot check here)
        print(f"SKIP: numba-cuda with NVVM is needed ({err})")  # noqa: T201
        return 3
    # Device functions compile for the current device's compute capability; without a
    # driver there is none, so the compiler is told of an sm_90 one.
    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=TARGET)
    from numba import cuda
    from wafersim.fabric import _cuda_kernels as CK

    # run_cycles_wide is run_cycles_grid's code: its register cap reaches only ptxas
    for mode, colors in MODES:
        signature = tuple(numba.typeof(v) for v in kernel_arguments(mode=mode, colors=colors))
        for name in ("run_cycles_block", "run_cycles_grid"):
            ptx, _ = cuda.compile_ptx(getattr(CK, name).py_func, signature, cc=TARGET)
            fused = FUSED.findall(ptx)
            if fused:
                print(f"FAIL {name} ({mode}, {colors} colors): {len(fused)} float32 FMAs")  # noqa: T201
                return 1
            print(f"ok {name} ({mode}, {colors} colors): {len(ptx):,} characters of PTX, "  # noqa: T201
                  "no float32 FMA")  # fmt: skip
    return 0


# A kernel compiles for one step: PE programs, traffic on one color, traffic on several
# (fabric._cuda_kernels._routers picks it by the types of the arguments)
MODES = (("programs", 1), ("traffic", 1), ("traffic", 2))


def kernel_arguments(layout: str | None = None, mode: str = "traffic", colors: int = 1) -> tuple:
    """Arguments of the types a launch in ``mode`` on ``colors`` passes in ``layout``
    (default the engine's; host arrays type like device arrays)."""
    from wafersim.fabric import _cuda_kernels as CK
    from wafersim.fabric.cuda_engine import (
        LAYOUT,
        kernel_layout,
        laid_out,
        mode_arrays,
        one_color_traffic,
    )
    from wafersim.fabric.engine import fabric_arrays
    from wafersim.fabric.mesh import Mesh
    from wafersim.fabric.state import allocate_state, empty_program
    from wafersim.fabric.traffic import ROUTINGS, TrafficConfig, traffic_arrays
    from wafersim.wafer.presets import preset

    mesh = Mesh.full(2, 2)
    route = np.zeros((mesh.pes, 5, colors), np.uint8)
    traffic = mode == "traffic"
    dor = np.ones(colors, np.uint8)
    fab = fabric_arrays(mesh, preset("tiny"), route, dor, traffic, ROUTINGS["xy"])
    st = allocate_state(mesh.pes, colors, fab.depth, fab.slots, 1, 1)
    tr = traffic_arrays(TrafficConfig(2, 2, cycles=10, warmup=1, colors=colors), mesh)
    want = np.zeros((mesh.pes, 2, 5 * colors), np.int64)
    prog = empty_program(mesh.pes)
    layout = layout or LAYOUT
    fab, st, prog, tr = (kernel_layout(a, layout, mesh.pes) for a in (fab, st, prog, tr))
    want = laid_out(want, 0) if layout == "router" else want
    want = CK.NOTHING if one_color_traffic(fab, st) else want
    prog, tr = mode_arrays(traffic, prog, tr)
    return (0, 1, fab, st, prog, tr, want, CK.new_control())


if __name__ == "__main__":
    sys.exit(main())
