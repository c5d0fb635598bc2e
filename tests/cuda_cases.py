"""Small cases run on engine="cpu" and engine="cuda", compared bit for bit.

Run by tests/test_fabric_cuda.py in Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1 must be set
before numba is imported, hence a script); on a machine with a GPU it runs as it is:

    python tests/cuda_cases.py [CASE ...]

Prints one line per case and exits 1 at the first difference, naming the case and the field.
Program cases compare every SimResult field (or the DeadlockError message); traffic cases
every number of the summary but the wall time; state cases every array of the engine state
and the traffic arrays after ``run_kernel`` (with three threads for 9 or 16 routers, one case
on each kernel: one block, cooperative grid, register-capped grid).
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wafersim.fabric import _engine_jit as K  # noqa: E402
from wafersim.fabric import cuda_engine  # noqa: E402
from wafersim.fabric.engine import fabric_arrays, program_state, run_kernel, simulate  # noqa: E402
from wafersim.fabric.mesh import Mesh  # noqa: E402
from wafersim.fabric.program import ProgramBuilder  # noqa: E402
from wafersim.fabric.routes import ColorRoutes  # noqa: E402
from wafersim.fabric.state import allocate_state, empty_program, empty_traffic, start_tasks  # noqa: E402
from wafersim.fabric.trace import TraceRecorder  # noqa: E402
from wafersim.fabric.traffic import ROUTINGS, TrafficConfig, run_traffic, traffic_arrays  # noqa: E402
from wafersim.kernels import kernel_plan  # noqa: E402
from wafersim.kernels.gemm_weight_stream import weight_stream  # noqa: E402
from wafersim.kernels.grid import kernel_grid  # noqa: E402
from wafersim.kernels.registry import run_kernel as run_registered_kernel  # noqa: E402
from wafersim.wafer.errors import DeadlockError  # noqa: E402
from wafersim.wafer.geometry import RAMP, E, W  # noqa: E402
from wafersim.wafer.presets import preset  # noqa: E402

SPEC = preset("tiny")
WALL_KEYS = ("sim_wall_s", "router_cycles_per_s", "engine")  # what differs between engines
ENGINES = ("cpu", "cuda")


def spec_with(depth: int = 4, latency: int = 1):
    return SPEC.replace({"router.queue_depth_wavelets": depth, "link.hop_latency_cycles": latency})


def memory(pes: int, words: int = 128, seed: int = 0, dtype: str = "fp32") -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "fp16":
        return rng.standard_normal((pes, 2 * words)).astype(np.float16).view(np.float32)
    return rng.standard_normal((pes, words)).astype(np.float32)


def program(mesh, spec, colors, calls, tasks=1):
    builder = ProgramBuilder(mesh.pes, spec.pe, colors, tasks)
    for name, *args in calls:
        getattr(builder, name)(*args)
    return builder.build()


def outcome(engine, mesh, spec, routes, prog, mem, max_cycles=2000, **options) -> dict:
    """Every field of the SimResult but the wall time, or the DeadlockError message."""
    try:
        r = simulate(
            mesh, spec, routes, prog, mem.copy(), max_cycles=max_cycles, engine=engine, **options
        )
    except DeadlockError as err:
        return {"deadlock": str(err)}
    fields = r.__dict__.copy()
    fields.pop("sim_wall_s")
    fields["mem"] = r.mem.flat
    return fields


# ---- program mode -------------------------------------------------------------------------


def send_recv(engine):
    """3 hops at latency 2, 5 words (tests/test_fabric_reference.py POINT_TO_POINT)."""
    mesh, spec = Mesh.full(4, 1), spec_with(depth=2, latency=2)
    routes = ColorRoutes(mesh, 1)
    routes.add_path(0, [0, 1, 2, 3])
    calls = [("send", 0, 0, 0, 0, 5), ("recv", 3, 0, 0, 64, 5)]
    return outcome(engine, mesh, spec, routes, program(mesh, spec, 1, calls), memory(4))


def strided_recv(engine):
    """``send_recv`` into every third word (a strided memory DSD)."""
    mesh, spec = Mesh.full(4, 1), spec_with(depth=2, latency=2)
    routes = ColorRoutes(mesh, 1)
    routes.add_path(0, [0, 1, 2, 3])
    calls = [("send", 0, 0, 0, 0, 5), ("recv", 3, 0, 0, 64, 5, "fp32", 3)]
    return outcome(engine, mesh, spec, routes, program(mesh, spec, 1, calls), memory(4))


def stretched_link(engine):
    """``send_recv`` over a wire repair stretched over 3 physical hops (link_hops 3): the
    wavelets and credits on it go through ``_send_late`` / ``_credit_late``."""
    mesh, spec = Mesh.full(4, 1), spec_with(depth=2, latency=2)
    hops = np.ones((1, 4, 4), np.int64)
    hops[0, 1, E], hops[0, 2, W] = 3, 3
    mesh = Mesh(mesh.width, mesh.height, mesh.alive, mesh.dead_link, hops)
    routes = ColorRoutes(mesh, 1)
    routes.add_path(0, [0, 1, 2, 3])
    calls = [("send", 0, 0, 0, 0, 5), ("recv", 3, 0, 0, 64, 5)]
    return outcome(engine, mesh, spec, routes, program(mesh, spec, 1, calls), memory(4))


def multicast(engine):
    """A 3x3 multicast tree from the centre to four leaves (tests/test_fabric.py)."""
    mesh = Mesh.full(3, 3)
    routes = ColorRoutes(mesh, 1)
    for leaf in (1, 3, 5, 7):
        routes.add_path(0, [4, leaf])
    calls = [("send", 4, 0, 0, 0, 12)] + [("recv", leaf, 0, 0, 50, 12) for leaf in (1, 3, 5, 7)]
    return outcome(engine, mesh, SPEC, routes, program(mesh, SPEC, 1, calls), memory(9))


def fmacs_backpressure(engine):
    """A slow fmacs consumer stalls the sender (tests/test_fabric.py)."""
    mesh = Mesh.full(3, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add_path(0, [0, 1, 2])
    calls = [("send", 0, 0, 0, 0, 8), ("fmacs", 2, 0, 0, 0, 16, 4, 8)]
    return outcome(engine, mesh, SPEC, routes, program(mesh, SPEC, 1, calls), memory(3))


def filtered_stream(engine):
    """A stream along a row whose routers hand their PEs part of it: a counter filter, a
    range filter that drops what it refuses (tests/test_filters.py)."""
    mesh = Mesh.full(3, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add(0, RAMP, 0, (E,))
    routes.add(1, W, 0, (RAMP, E))
    routes.add(2, W, 0, (RAMP,))
    routes.counter_filter(1, 0, max_counter=1, limit1=3, init_counter=2)
    routes.range_filter(2, 0, min_idx=2, max_idx=5)
    mem = memory(3)
    mem[0, :8] = (np.arange(8, dtype=np.uint32) << 16 | 3).view(np.float32)
    calls = [("send", 0, 0, 0, 0, 8), ("recv", 1, 0, 0, 64, 4), ("recv", 2, 0, 0, 64, 4)]
    return outcome(engine, mesh, SPEC, routes, program(mesh, SPEC, 1, calls), mem)


def _control_chain():
    """A row of four: PE 0 sends 2 words east, a control wavelet that advances routers 1
    and 2 (always popping), then 4 words; routers 1 and 2 move from ramp-and-on to on alone
    and back (ring mode)."""
    mesh = Mesh.full(4, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add(0, RAMP, 0, (E,))
    for pe in (1, 2):
        routes.add(pe, W, 0, (RAMP, E))
    forward = np.zeros(5, np.int64)
    forward[W] = 1 << E
    routes.switch_positions([1, 2], 0, [forward], ring_mode=True, pop_mode="always")
    routes.switch_positions(0, 0, [], pop_mode="always")
    routes.add(3, W, 0, (RAMP,))
    calls = [("send", 0, 0, 0, 0, 2), ("control", 0, 0, 0, [0, 1, 1]), ("send", 0, 0, 0, 2, 4)]
    calls += [("recv", 1, 0, 0, 64, 2), ("recv", 2, 0, 0, 64, 2), ("recv", 3, 0, 0, 64, 6)]
    return mesh, routes, program(mesh, SPEC, 1, calls)


def control_chain(engine):
    """Control wavelets moving the switches of the routers they pass (tests/test_control.py)."""
    mesh, routes, prog = _control_chain()
    return outcome(engine, mesh, SPEC, routes, prog, memory(4))


def reduction_chain(engine):
    """recv_add along a chain on two alternating colors (tests/test_fabric.py)."""
    mesh = Mesh.full(4, 1)
    routes = ColorRoutes(mesh, 2)
    calls = []
    for pe in range(3, 0, -1):
        routes.add_path(pe % 2, [pe, pe - 1])
        if pe < 3:
            calls.append(("recv_add", pe, 0, (pe + 1) % 2, 0, 6))
        calls.append(("send", pe, 0, pe % 2, 0, 6))
    calls.append(("recv_add", 0, 0, 1, 0, 6))
    return outcome(engine, mesh, SPEC, routes, program(mesh, SPEC, 2, calls), memory(4))


def local_ops_tasks(engine):
    """vadd, vscale, vfma on concurrent tasks beside a stream (test_fabric_reference.py)."""
    mesh = Mesh.full(2, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add_path(0, [0, 1])
    calls = [
        ("send", 0, 0, 0, 0, 5),
        ("vscale", 0, 1, 40, 8, 2.5, 1),
        ("vadd", 0, 1, 50, 0, 8, 6),
        ("recv", 1, 0, 0, 64, 5),
        ("vfma", 1, 1, 90, 0, 8, 1),
        ("vfma", 1, 1, 100, 0, 8, 3),
    ]
    prog = program(mesh, SPEC, 1, calls, tasks=2)
    return outcome(engine, mesh, SPEC, routes, prog, memory(2))


def fp16_wait_matmul(engine):
    """fp16 stream, blocked fmacs, wait and matmul across tasks (test_fabric_reference.py)."""
    mesh = Mesh.full(2, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add_path(0, [0, 1])
    calls = [
        ("send", 0, 0, 0, 0, 6, "fp16"),
        ("fmacs", 1, 0, 0, 40, 0, 2, 3, "fp16", 2),
        ("wait", 1, 1, 0, 1),
        ("matmul", 1, 1, 60, 8, 16, 3, 2, 4, "fp16"),
        ("vadd", 1, 0, 80, 40, 60, 4, "fp16"),
    ]
    prog = program(mesh, SPEC, 1, calls, tasks=2)
    return outcome(engine, mesh, SPEC, routes, prog, memory(2, seed=5, dtype="fp16"))


def wait_for_last_cycle(engine):
    """Waits on a long vadd from a task stepped after it and one stepped before: each goes
    on once the vadd's last cycle has run (test_fabric_reference.py)."""
    mesh = Mesh.full(2, 1)
    routes = ColorRoutes(mesh, 2)
    routes.add_path(0, [0, 1])
    routes.add_path(1, [0, 1])
    calls = [
        ("vadd", 0, 1, 40, 0, 10, 6),
        ("wait", 0, 0, 1, 1),
        ("send", 0, 0, 0, 40, 1),
        ("wait", 0, 2, 1, 1),
        ("send", 0, 2, 1, 41, 1),
        ("recv", 1, 0, 0, 64, 1),
        ("recv", 1, 1, 1, 65, 1),
    ]
    prog = program(mesh, SPEC, 2, calls, tasks=3)
    return outcome(engine, mesh, SPEC, routes, prog, memory(2))


def loops(engine):
    """Nested loops: a stream of steps, each a send and a loop of three parts, received,
    added and waited on by a second task (tests/test_program_loops.py)."""
    mesh = Mesh.full(2, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add_path(0, [0, 1])
    builder = ProgramBuilder(mesh.pes, SPEC.pe, 1, 2)

    def step(i):
        builder.send(0, 0, 0, 4 * i, 4)
        builder.repeat(3, lambda j: builder.send(0, 0, 0, 40 + 2 * j, 2))
        builder.recv_add(1, 0, 0, 4 * i, 4)
        builder.repeat(3, lambda j: builder.recv(1, 0, 0, 60 + 2 * j, 2))
        builder.wait(1, 1, 0, builder.ops_in(1, 0))
        builder.vadd(1, 1, 80 + 4 * i, 4 * i, 60, 4)

    builder.repeat(5, step)
    return outcome(engine, mesh, SPEC, routes, builder.build(), memory(2))


def traced(engine):
    """The fmacs case in chunks of 7 cycles with a trace: the samples agree too."""
    mesh = Mesh.full(3, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add_path(0, [0, 1, 2])
    prog = program(mesh, SPEC, 1, [("send", 0, 0, 0, 0, 6), ("fmacs", 2, 0, 0, 0, 16, 3, 6)])
    trace = TraceRecorder(7, 3, 1)
    fields = outcome(engine, mesh, SPEC, routes, prog, memory(3), trace=trace)
    return fields | {"trace_cycles": np.array(trace.cycles), "trace_link": np.array(trace.link)}


def captured(run):
    """The plan that ``run()`` would simulate (kernels.kernel_plan's recorder hook): mesh, spec,
    routes, program, memory and max cycles."""
    seen = []

    def capture(plan, routes, prog, mem, max_cycles):
        seen.append((plan.grid.mesh, plan.spec, routes, prog, mem, max_cycles))
        return simulate(plan.grid.mesh, plan.spec, routes, prog, mem, max_cycles=max_cycles)

    token = kernel_plan.RECORDER.set(capture)
    try:
        run()
    finally:
        kernel_plan.RECORDER.reset(token)
    return seen[0]


def gemm_summa(engine):
    """SUMMA on a 3x3 kernel grid (a 4x4 mesh with its ports; the middle roots switch their
    routers), captured and run on ``engine``."""
    shape = {"m": 6, "k": 6, "n": 6}
    mesh, spec, routes, prog, mem, max_cycles = captured(
        lambda: run_registered_kernel("gemm", "summa", shape, kernel_grid(3, 3), SPEC, seed=3)
    )
    assert (prog.ops[:, 0] == K.OP_SWITCH).any(), "the case runs switch ops"
    return outcome(engine, mesh, spec, routes, prog, mem, max_cycles)


def sparse_weight_stream(engine):
    """Weight streaming of weights pruned to 0.2 (compressed blocks: spmacs) in fp32 and
    bf16, with zero activations (skipped fmacs and spmacs wavelets)."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((6, 16)).astype(np.float32)
    a[:, :4] = 0
    b = rng.standard_normal((16, 24)).astype(np.float32)
    b = np.where(rng.random(b.shape) < 0.2, b, np.float32(0))
    fields = {}
    for dtype in ("fp32", "bf16"):
        mesh, spec, routes, prog, mem, max_cycles = captured(
            lambda dtype=dtype: weight_stream(a, b, kernel_grid(2, 2), SPEC, dtype)
        )
        assert (prog.ops[:, 0] == K.OP_SPMACS).any(), "the case runs spmacs ops"
        run = outcome(engine, mesh, spec, routes, prog, mem, max_cycles)
        fields |= {f"{dtype}_{key}": value for key, value in run.items()}
    return fields


def deadlock_ring(engine):
    """Wavelets stuck on a ring of routes (the route check off): the same DeadlockError."""
    mesh = Mesh.full(2, 2)
    routes = ColorRoutes(mesh, 1)
    routes.add(0, RAMP, 0, (E,))
    ring = [0, 1, 3, 2, 0]
    for here, there in zip(ring, ring[1:], strict=False):
        routes.add_path(0, [here, there], deliver=False)
    spec = spec_with(depth=2, latency=2)
    prog = program(mesh, spec, 1, [("send", 0, 0, 0, 0, 20)])
    return outcome(engine, mesh, spec, routes, prog, memory(4), check_routes=False)


def deadlock_missing_sender(engine):
    """A receive of 5 words where 3 are sent: the same DeadlockError naming the task."""
    mesh = Mesh.full(2, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add_path(0, [0, 1])
    prog = program(mesh, SPEC, 1, [("send", 0, 0, 0, 0, 3), ("recv", 1, 0, 0, 0, 5)])
    return outcome(engine, mesh, SPEC, routes, prog, memory(2))


# ---- traffic mode -------------------------------------------------------------------------


def traffic(engine, **options):
    cfg = TrafficConfig(**({"width": 4, "height": 4, "cycles": 150, "warmup": 20} | options))
    summary = run_traffic(cfg, SPEC, engine=engine)
    return {key: value for key, value in summary.items() if key not in WALL_KEYS}


def traffic_uniform(engine):
    """Uniform traffic near saturation on 4x4, XY routing."""
    return traffic(engine, rate=0.5, seed=1)


def traffic_transpose_yx(engine):
    """Transpose traffic, YX routing, a shallow queue, drained at the end."""
    return traffic(engine, pattern="transpose", routing="yx", rate=0.3, queue_depth=2,
                   drain_cycles=40, seed=2)  # fmt: skip


def traffic_colors(engine):
    """Uniform traffic over three colors (virtual channels), near saturation."""
    return traffic(engine, rate=0.6, colors=3, seed=4)


def traffic_hotspot(engine):
    """Hotspot traffic: a quarter of the packets to the centre PE."""
    return traffic(engine, pattern="hotspot", rate=0.2, seed=3)


def traffic_updown_hole(engine):
    """Uniform traffic around a dead PE and a dead link, up*/down* routing (table walks)."""
    mesh = Mesh.full(4, 4)
    alive, dead_link = mesh.alive.copy(), mesh.dead_link.copy()
    alive[1, 2] = False
    dead_link[2, 0, E] = dead_link[2, 1, W] = True
    cfg = TrafficConfig(4, 4, "uniform", 0.3, routing="updown", cycles=150, warmup=20, seed=5)
    summary = run_traffic(cfg, SPEC, mesh=Mesh(4, 4, alive, dead_link), engine=engine)
    return {key: value for key, value in summary.items() if key not in WALL_KEYS}


# ---- whole engine state, each kernel ------------------------------------------------------


def state_after(engine, fab, st, prog, tr, cycles, launch, layout="rows") -> dict:
    """Run cycles [0, cycles); the GPU with 3 threads, so that a thread steps several routers,
    its arrays in ``layout`` (cuda_engine.LAYOUTS)."""
    if engine == "cpu":
        status, cycle = run_kernel(fab, st, prog, tr, 0, cycles, False)
    else:
        status, cycle = cuda_engine.run_kernel(fab, st, prog, tr, 0, cycles, launch, threads=3,
                                               layout=layout)  # fmt: skip
    arrays = {f"st.{k}": v for k, v in st._asdict().items()}
    arrays |= {f"tr.{k}": v for k, v in tr._asdict().items() if isinstance(v, np.ndarray)}
    return arrays | {"status": status, "cycle": cycle}


def state_program(engine, layout="rows"):
    """Every state array after the multicast program, stopped mid-way at cycle 12 (one
    block)."""
    mesh = Mesh.full(3, 3)
    routes = ColorRoutes(mesh, 1)
    for leaf in (1, 3, 5, 7):
        routes.add_path(0, [4, leaf])
    calls = [("send", 4, 0, 0, 0, 12)] + [("recv", leaf, 0, 0, 50, 12) for leaf in (1, 3, 5, 7)]
    prog = program(mesh, SPEC, 1, calls)
    fab = fabric_arrays(mesh, SPEC, routes.table, np.zeros(1, np.uint8), False)
    st = allocate_state(mesh.pes, 1, fab.depth, fab.slots, 128, 1)
    st.mem[:] = memory(9).reshape(-1)
    start_tasks(st, prog, fab.startup)
    return state_after(engine, fab, st, prog, empty_traffic(3, 3), 12, "block", layout)


def stepped_filters(engine, layout="rows"):
    """A filtered stream stepped a cycle a call: the filters' counts (fabric arrays the run
    writes) go on from call to call, on the GPU as on the CPU."""
    mesh = Mesh.full(3, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add(0, RAMP, 0, (E,))
    routes.add(1, W, 0, (RAMP, E))
    routes.add(2, W, 0, (RAMP,))
    routes.counter_filter(1, 0, max_counter=0, limit1=3)
    routes.counter_filter(2, 0, max_counter=0, limit1=1)
    calls = [("send", 0, 0, 0, 0, 8), ("recv", 1, 0, 0, 64, 2), ("recv", 2, 0, 0, 64, 4)]
    return _stepped(engine, mesh, routes, program(mesh, SPEC, 1, calls), layout)


def stepped_controls(engine):
    """``control_chain`` stepped a cycle a call: the switches' positions and routes (and
    the control wavelet's metadata in the queues) go on from call to call."""
    return _stepped(engine, *_control_chain(), "rows")


def _stepped(engine, mesh, routes, prog, layout):
    fab, st = program_state(mesh, SPEC, routes.table, prog, 128, routes.filters, routes.switches)
    st.mem[:] = memory(mesh.pes).reshape(-1)
    start_tasks(st, prog, fab.startup)
    tr = empty_traffic(mesh.width, mesh.height)
    for t in range(100):
        if engine == "cpu":
            status, cycle = run_kernel(fab, st, prog, tr, t, t + 1, False)
        else:
            status, cycle = cuda_engine.run_kernel(
                fab, st, prog, tr, t, t + 1, "block", layout=layout
            )
        if status != K.STATUS_MAX_CYCLES:
            break
    return {"mem": st.mem.copy(), "rx_count": st.rx_count.copy(), "status": status, "cycle": cycle}


def stepped_filters_router(engine):
    """``stepped_filters`` with the device arrays' router axis fastest."""
    return stepped_filters(engine, "router")


def state_program_router(engine):
    """``state_program`` with the device arrays' router axis fastest."""
    return state_program(engine, "router")


def state_traffic(engine, launch="grid", layout="rows"):
    """Every state and traffic array after 60 cycles of bit-complement traffic on 4x4
    (``launch``: the cooperative grid kernel, or its register-capped twin)."""
    cfg = TrafficConfig(4, 4, "bitcomp", 0.4, cycles=60, warmup=5, seed=4)
    mesh = Mesh.full(4, 4)
    route = np.zeros((mesh.pes, 5, 1), np.uint8)
    fab = fabric_arrays(mesh, SPEC, route, np.ones(1, np.uint8), True, ROUTINGS["xy"])
    st = allocate_state(mesh.pes, 1, fab.depth, fab.slots, 1, 1)
    tr = traffic_arrays(cfg, mesh)
    return state_after(engine, fab, st, empty_program(mesh.pes), tr, cfg.cycles, launch, layout)


def state_traffic_router(engine):
    """``state_traffic`` with the device arrays' router axis fastest."""
    return state_traffic(engine, layout="router")


def state_traffic_wide(engine):
    """``state_traffic`` on the register-capped grid kernel (the same kernel as the grid's
    in the simulator, which ignores register limits: it differs on a GPU only)."""
    return state_traffic(engine, "wide")


CASES = {
    f.__name__: f
    for f in (
        send_recv,
        strided_recv,
        stretched_link,
        multicast,
        fmacs_backpressure,
        filtered_stream,
        control_chain,
        reduction_chain,
        local_ops_tasks,
        fp16_wait_matmul,
        wait_for_last_cycle,
        loops,
        traced,
        gemm_summa,
        sparse_weight_stream,
        deadlock_ring,
        deadlock_missing_sender,
        traffic_uniform,
        traffic_transpose_yx,
        traffic_colors,
        traffic_hotspot,
        traffic_updown_hole,
        state_program,
        state_program_router,
        stepped_filters,
        stepped_filters_router,
        stepped_controls,
        state_traffic,
        state_traffic_router,
        state_traffic_wide,
    )
}


def differences(cpu: dict, gpu: dict) -> list[str]:
    """Fields that differ (arrays bit for bit: float32 compared as their bits)."""
    found = [f"fields {sorted(cpu)} != {sorted(gpu)}"] if cpu.keys() != gpu.keys() else []
    for key in cpu.keys() & gpu.keys():
        a, b = np.asarray(cpu[key]), np.asarray(gpu[key])
        if a.dtype.kind == "f" and a.dtype == b.dtype:
            a, b = a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}")
        if a.shape != b.shape or a.dtype != b.dtype or not np.array_equal(a, b):
            found.append(f"{key}: cpu {cpu[key]!r} != cuda {gpu[key]!r}")
    return found


def main(names: list[str]) -> int:
    warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)  # xorshift wraps
    for name in names or list(CASES):
        start = time.perf_counter()
        cpu, gpu = (CASES[name](engine) for engine in ENGINES)
        diff = differences(cpu, gpu)
        if diff:
            print(f"FAIL {name}: " + "; ".join(diff)[:4000])  # noqa: T201 (the report)
            return 1
        print(f"ok {name} ({time.perf_counter() - start:.1f} s)")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
