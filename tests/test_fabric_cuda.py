"""The CUDA engine (engine="cuda") against the CPU engine, in Numba's CUDA simulator.

The simulator must be switched on before numba is imported, so the cases (tests/cuda_cases.py)
run in a subprocess; this file checks how an engine is chosen.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from wafersim.fabric.engine import simulate
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.program import ProgramBuilder
from wafersim.fabric.routes import ColorRoutes
from wafersim.fabric.traffic import TrafficConfig, run_traffic
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset

SPEC = preset("tiny")
CASES = Path(__file__).with_name("cuda_cases.py")
PTX = Path(__file__).with_name("cuda_ptx.py")
NO_NVVM = 3  # cuda_ptx.py's exit status when numba-cuda or NVVM is missing


def send_recv():
    mesh = Mesh.full(2, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add_path(0, [0, 1])
    builder = ProgramBuilder(2, SPEC.pe, 1)
    builder.send(0, 0, 0, 0, 1)
    builder.recv(1, 0, 0, 0, 1)
    return mesh, SPEC, routes, builder.build(), np.zeros((2, 4), np.float32)


@pytest.mark.skipif(importlib.util.find_spec("numba.cuda") is None, reason="no numba.cuda")
def test_cuda_engine_matches_cpu_bit_for_bit_in_the_simulator():
    """Every case of tests/cuda_cases.py is bit-identical on engine='cuda' and engine='cpu'."""
    env = os.environ | {"NUMBA_ENABLE_CUDASIM": "1"}
    done = subprocess.run(
        [sys.executable, str(CASES)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout


def test_cuda_kernels_compile_for_a_gpu_where_numba_cuda_and_nvvm_are_installed():
    """The kernels compile with numba-cuda and NVVM for sm_90, with no float32 FMA."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run(
        [sys.executable, str(PTX)], capture_output=True, text=True, check=False, timeout=600,
        env=env,
    )  # fmt: skip
    if done.returncode == NO_NVVM:
        pytest.skip(done.stdout.strip())
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]


RACE_DEVICE_MODULE = """
from numba import cuda

@cuda.jit(device=True)
def bump(counts, i):
    for _ in range(20):
        cuda.atomic.add(counts, i % 4, 1)
"""
RACE_KERNEL = """
import sys
import numpy as np
sys.setswitchinterval(1e-6)  # the simulator's threads switch often: the race shows at once
import wafersim.fabric._cuda_device  # what the engine imports first: it installs the counted swap
from numba import cuda
from race_device import bump

@cuda.jit
def kernel(counts):
    bump(counts, cuda.threadIdx.x)

counts = np.zeros(4, np.int64)
kernel[1, 64](counts)
print(int(counts.sum()))
"""


@pytest.mark.skipif(importlib.util.find_spec("numba.cuda") is None, reason="no numba.cuda")
def test_simulator_threads_in_device_functions_of_one_module_keep_the_fake_cuda(tmp_path):
    """64 simulated threads in a device function of another module than the kernel's, each
    adding atomically: without fabric._cudasim_fixes the first thread to return restores the
    real numba.cuda under the others ("no attribute 'atomic'"; every time at this switch
    interval); with it every add lands."""
    (tmp_path / "race_device.py").write_text(RACE_DEVICE_MODULE)
    (tmp_path / "race_kernel.py").write_text(RACE_KERNEL)
    root = str(Path(__file__).resolve().parents[1])
    env = os.environ | {"NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": f"{root}:{tmp_path}"}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "race_kernel.py")],
        capture_output=True, text=True, check=False, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(64 * 20)]


BARRIER_KERNELS = """
import time

import numpy as np
import wafersim.fabric._cuda_device  # installs fabric._cudasim_fixes' block manager
from numba import cuda
from numba.cuda.simulator import kernel as simulator

assert simulator.BlockManager.__name__ == "BarrierBlockManager"


@cuda.jit
def rotate(values, rounds):  # each round reads the left neighbour's value of the last round
    i = cuda.threadIdx.x
    n = cuda.blockDim.x
    for _ in range(rounds):
        mine = values[(i - 1) % n]
        cuda.syncthreads()
        values[i] = mine
        cuda.syncthreads()


@cuda.jit
def early_exit(out):  # half the threads leave; the others still meet at the barrier
    i = cuda.threadIdx.x
    if i % 2:
        return
    cuda.syncthreads()
    out[i] = cuda.syncthreads_count(1)


@cuda.jit
def raises(out):  # one thread fails while the others wait at the barrier
    i = cuda.threadIdx.x
    if i == 3:
        out[10] = 1.0  # out of bounds
    cuda.syncthreads()
    out[i] = 1.0


class TwoArguments(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)


@cuda.jit
def raises_unrebuildable(out):  # the simulator rebuilds an error with one argument: this fails
    if cuda.threadIdx.x == 1:
        raise TwoArguments(1, 2)
    cuda.syncthreads()


@cuda.jit(device=True)
def linger(out, i):
    time.sleep(0.3)  # still inside this module when the launch has failed and returned
    out[i] = cuda.blockDim.x


@cuda.jit
def fails_while_one_lingers(out):
    if cuda.threadIdx.x == 0:
        out[99] = 1.0  # out of bounds
    else:
        linger(out, cuda.threadIdx.x)


@cuda.jit
def block_width(out):
    out[cuda.threadIdx.x] = cuda.blockDim.x


values = np.arange(8.0)
rotate[1, 8](values, 3)
print(list(values) == list(np.roll(np.arange(8.0), 3)))
out = np.zeros(8)
early_exit[1, 8](out)
print(list(out) == [4, 0, 4, 0, 4, 0, 4, 0])
try:
    raises[1, 8](np.zeros(8))
    print("no error")
except IndexError as error:
    print("tid=[3, 0, 0]" in str(error))
try:
    raises_unrebuildable[1, 4](np.zeros(4))
    print("no error")
except RuntimeError as error:
    print("tid=[1, 0, 0]" in str(error) and "TypeError" in str(error))
try:
    fails_while_one_lingers[1, 2](np.zeros(2))
except IndexError:
    pass
out = np.zeros(3)
block_width[1, 3](out)  # this launch's own blockDim, not the failed one's
print(list(out) == [3, 3, 3])
"""


@pytest.mark.skipif(importlib.util.find_spec("numba.cuda") is None, reason="no numba.cuda")
def test_the_simulators_barrier_waits_releases_and_aborts(tmp_path):
    """fabric._cudasim_fixes' block barrier: rounds of syncthreads order the threads' reads
    and writes, threads that return early leave the others to meet (syncthreads_count counts
    the four left), a thread that raises while the others wait at a barrier ends the kernel
    with its error, naming it, as does one whose error the simulator cannot rebuild (a hang
    before), and a launch after a failed one sees its own blockDim though a thread of the
    failed one is still in a device function of its module."""
    (tmp_path / "barrier_kernels.py").write_text(BARRIER_KERNELS)
    root = str(Path(__file__).resolve().parents[1])
    env = os.environ | {"NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": root}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "barrier_kernels.py")],
        capture_output=True, text=True, check=False, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True"] * 5


@pytest.mark.parametrize(
    ("pes", "step", "kernel"),
    [
        (16384, "programs", "grid"),
        (2**20, "programs", "wide"),
        (2**20, "traffic", "wide"),
        (2**20, "one-color traffic", "grid"),
    ],
)
def test_auto_launch_takes_the_wide_kernel_when_routers_outnumber_grid_threads(
    monkeypatch, pes, step, kernel
):
    """On a cooperative GPU, auto runs the grid kernel if its threads cover the routers, and
    the one-color traffic step on it at any size (it spills in the register-capped one)."""
    cuda_engine = pytest.importorskip("wafersim.fabric.cuda_engine")
    gpu = SimpleNamespace(compute_capability=(9, 0))
    monkeypatch.setattr(cuda_engine.numba.config, "ENABLE_CUDASIM", False)
    monkeypatch.setattr(cuda_engine.cuda, "get_current_device", lambda: gpu)

    def cooperative(launch, pes, args, most):
        threads = cuda_engine.THREADS[launch]
        return launch, min(ceil_div(pes, threads), 396), threads  # 3 blocks on each of 132 SMs

    monkeypatch.setattr(cuda_engine, "_cooperative", cooperative)
    nothing, arrays = cuda_engine.CK.NOTHING, np.zeros(1)
    tr, want = {"programs": (nothing, arrays), "traffic": (arrays, arrays)}.get(
        step, (arrays, nothing)
    )
    args = (0, 1, None, None, None, tr, want, None)
    assert cuda_engine._configure("auto", pes, args, None)[0] == kernel


def test_unknown_engine_is_a_config_error_naming_the_engines():
    """engine='gpu' is refused by simulate and run_traffic, listing cpu and cuda."""
    with pytest.raises(ConfigError, match=r"engine='gpu' is not one of: cpu, cuda"):
        simulate(*send_recv(), max_cycles=100, engine="gpu")
    cfg = TrafficConfig(width=2, height=2, cycles=20, warmup=1)
    with pytest.raises(ConfigError, match=r"engine='gpu' is not one of: cpu, cuda"):
        run_traffic(cfg, SPEC, engine="gpu")


def test_cuda_without_a_gpu_or_the_simulator_is_a_config_error():
    """engine='cuda' where numba.cuda finds no GPU (and the simulator is off) says so."""
    cuda = pytest.importorskip("numba.cuda")
    if cuda.is_available():
        pytest.skip("a GPU (or the simulator) is available here")
    with pytest.raises(ConfigError, match=r"engine='cuda' needs an NVIDIA GPU"):
        simulate(*send_recv(), max_cycles=100, engine="cuda")
