"""The cycle engine against the slow reference model (tests/reference_fabric.py), in lockstep.

Each case steps the engine one cycle at a time and the reference beside it, and after every
cycle compares queue occupancy per (router, port, color), receive queues, credits, wavelets
and stalls per (router, port), SRAM, task pc and progress, busy and stall cycles (program
mode) or the traffic counters (traffic mode), then the cycle the run ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_fabric import ReferenceFabric, ReferenceProgram
from wafersim.fabric import _engine_jit as K
from wafersim.fabric.engine import fabric_arrays, program_state, run_kernel, simulate
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.program import ProgramBuilder
from wafersim.fabric.routes import ColorRoutes
from wafersim.fabric.state import allocate_state, empty_program, empty_traffic, start_tasks
from wafersim.fabric.traffic import NEVER, ROUTINGS, TrafficConfig, run_traffic, traffic_arrays
from wafersim.wafer.errors import ConfigError, DeadlockError
from wafersim.wafer.geometry import RAMP, E, N, S, W
from wafersim.wafer.presets import preset

# op startup 2 cycles, 1 fp32 FMAC per cycle; no cost to activate a task or loop around an
# instruction, so an fmacs wavelet costs its instruction's start-up and m cycles: the counts
# below read directly
SPEC = preset("tiny").replace({"pe.issue_cycles": 0, "pe.task_activation_cycles": 0})
STARTUP = SPEC.pe.op_startup_cycles
WORDS = 128


def spec_with(depth: int = 4, latency: int = 1, **pe):
    """The tiny preset with this queue depth, hop latency and ``pe.*`` overrides."""
    knobs = {"router.queue_depth_wavelets": depth, "link.hop_latency_cycles": latency}
    return SPEC.replace(knobs | {f"pe.{key}": value for key, value in pe.items()})


def random_memory(pes: int, seed: int = 0, dtype: str = "fp32") -> np.ndarray:
    """Normal random values; for fp16 two per word (so no word holds an fp16 NaN)."""
    rng = np.random.default_rng(seed)
    if dtype == "fp16":
        return rng.standard_normal((pes, 2 * WORDS)).astype(np.float16).view(np.float32)
    return rng.standard_normal((pes, WORDS)).astype(np.float32)


@dataclass
class Run:
    cycles: int
    ref: ReferenceFabric
    mem: np.ndarray  # the engine's SRAM at the end
    q_count: list[np.ndarray] = field(default_factory=list, repr=False)  # after each cycle


def assert_same(t: int, engine: dict, reference: dict) -> None:
    """Every array the reference reports equals the engine's of the same name."""
    for name, want in reference.items():
        got = engine[name]
        if got.dtype == np.float32:  # SRAM words: compare bits (fp16 pairs, -0.0)
            got, want = got.view(np.uint32), want.view(np.uint32)
        if not np.array_equal(got, want):
            at = np.argwhere(got != want)[:4]
            pytest.fail(
                f"cycle {t}: {name} differs at {at.tolist()}: "
                f"engine {got[tuple(at.T)].tolist()}, reference {want[tuple(at.T)].tolist()}"
            )


def task_counters(eng, prog, t: int) -> dict[str, np.ndarray]:
    """The engine's ops done and elements done after cycle ``t``, as the reference keeps them:
    the engine counts an op in ``pc`` from its last element's start, the reference once that
    element's cycles have run (the engine's ``finish``: until then its elements all done)."""
    unfinished = eng.regs[:, :, K.T_FINISH] > t
    last = eng.op[:, :, K.C_N]  # the op moved past: the next loads once its cycles have run
    return {"pc": eng.regs[:, :, K.T_DONE] - unfinished,
            "progress": np.where(unfinished, last, eng.progress)}  # fmt: skip


def build_programs(mesh, spec, colors, tasks, calls):
    """The same ProgramBuilder calls, ``(method, pe, task, *args)``, for engine and reference."""
    builder = ProgramBuilder(mesh.pes, spec.pe, colors, tasks)
    reference = ReferenceProgram(mesh.pes, spec.pe, tasks)
    for name, *args in calls:
        getattr(builder, name)(*args)
        getattr(reference, name)(*args)
    return builder.build(), reference


def lockstep(mesh, spec, routes, calls, memory, tasks=1, max_cycles=3000) -> Run:
    """Run a program on engine and reference a cycle at a time; fail at the first difference."""
    prog, ref_prog = build_programs(mesh, spec, routes.colors, tasks, calls)
    # the setup lines of fabric.engine.simulate
    fab, eng = program_state(
        mesh, spec, routes.table, prog, memory.shape[1], routes.filters, routes.switches
    )
    eng.mem[:] = memory.reshape(-1)  # every PE memory.shape[1] words
    start_tasks(eng, prog, fab.startup)
    tr = empty_traffic(mesh.width, mesh.height)
    ref = ReferenceFabric.for_program(
        mesh, spec, routes.table, ref_prog, memory, routes.filters, routes.switches
    )
    run = Run(-1, ref, eng.mem.reshape(memory.shape))
    for t in range(max_cycles):
        status, cycle = run_kernel(fab, eng, prog, tr, t, t + 1, False)
        active = ref.step()
        assert_same(t, eng._asdict() | task_counters(eng, prog, t), ref.state())
        run.q_count.append(eng.q_count.copy())
        done = not active and not ref.pending()
        assert (status == K.STATUS_DONE) == done, f"cycle {t}: engine status {status}"
        if done:
            assert cycle == t
            run.cycles = cycle
            return run
    pytest.fail(f"no end within {max_cycles} cycles")


def lockstep_traffic(width, height, spec, pattern, flits, schedule, cycles, yx=False, warmup=0,
                     hops=None):  # fmt: skip
    """Wormhole traffic: ``schedule[pe]`` lists the cycles PE ``pe`` creates its packets.

    The engine draws arrivals at random; before every cycle the test writes each PE's next
    creation cycle from the schedule into ``next_arrival``, which is exactly what that
    array means to the kernel (a start shows as the kernel moving it on).
    """
    mesh = stretched(Mesh.full(width, height), hops or {})
    routing = "yx" if yx else "xy"
    cfg = TrafficConfig(
        width, height, pattern, 1.0, flits, routing=routing, cycles=cycles, warmup=warmup
    )
    # the setup lines of fabric.traffic.run_traffic
    route = np.zeros((mesh.pes, 5, 1), np.uint8)
    fab = fabric_arrays(mesh, spec, route, np.ones(1, np.uint8), True, ROUTINGS[routing])
    eng = allocate_state(mesh.pes, 1, fab.depth, fab.slots, 1, 1)
    tr = traffic_arrays(cfg, mesh)
    prog = empty_program(mesh.pes)
    ref = ReferenceFabric.for_traffic(
        mesh,
        spec,
        pattern=pattern,
        packet_flits=flits,
        schedule=schedule,
        warmup=warmup,
        yx=yx,
        stop=cfg.cycles - cfg.drain_cycles,
    )
    started = [0] * mesh.pes
    for t in range(cycles):
        for pe in range(mesh.pes):
            times = schedule.get(pe, ())
            tr.next_arrival[pe] = times[started[pe]] if started[pe] < len(times) else NEVER
        before = tr.next_arrival.copy()
        run_kernel(fab, eng, prog, tr, t, t + 1, False)
        started = [
            s + int(a != b) for s, a, b in zip(started, tr.next_arrival, before, strict=True)
        ]
        ref.step()
        assert_same(t, eng._asdict() | tr._asdict(), ref.state())
    return ref


def line(length: int, colors: int = 1):
    """A ``length x 1`` mesh and an empty route table."""
    mesh = Mesh.full(length, 1)
    return mesh, ColorRoutes(mesh, colors)


# ---------------------------------------------------------------------------------------
# Program mode, static colors

# A stream of n words over h hops: startup s, one cycle from the ramp queue into the router,
# h*L on the wires, n - 1 behind the first: s + 1 + h*L + n cycles, as long as n <= D or
# D >= 2L. A queue of depth D behind a hop of latency L passes at most D wavelets per 2L
# cycles, the round trip of a credit.
#   hops  latency  depth  words  cycles
POINT_TO_POINT = [
    (1, 1, 4, 1, 5),
    (3, 1, 4, 5, 11),
    (3, 2, 4, 5, 14),
    (2, 3, 4, 3, 12),
    (1, 1, 2, 6, 10),
    (1, 1, 1, 3, 9),  # one wavelet per 2 cycles: leaves at 3, 5, 7
    (1, 3, 1, 3, 19),  # one per 6 cycles: leaves at 3, 9, 15
    (2, 3, 2, 4, 17),  # two per 6 cycles: arrive at 9, 10, 15, 16
]


@pytest.mark.parametrize(("hops", "latency", "depth", "words", "cycles"), POINT_TO_POINT)
def test_point_to_point_stream(hops, latency, depth, words, cycles):
    """A stream takes s + 1 + h*L + n cycles, or is held to D wavelets per 2L cycles."""
    mesh, routes = line(hops + 1)
    routes.add_path(0, list(range(hops + 1)))
    calls = [("send", 0, 0, 0, 0, words), ("recv", hops, 0, 0, 64, words)]
    mem = random_memory(hops + 1)
    spec = spec_with(depth, latency)
    run = lockstep(mesh, spec, routes, calls, mem)
    assert run.cycles == cycles
    np.testing.assert_array_equal(run.mem[hops, 64 : 64 + words], mem[0, :words])
    prog, _ = build_programs(mesh, spec, 1, 1, calls)
    whole = simulate(mesh, spec, routes, prog, mem, max_cycles=1000)
    assert whole.cycles == cycles  # stepping a cycle at a time changes nothing


@pytest.mark.parametrize("stride", [2, 3])
def test_a_strided_receive_writes_every_stride_th_word_in_lockstep(stride):
    """A receive into a strided memory DSD: word ``k`` of the stream lands at ``64 + k
    stride``, the words between untouched, in the cycles a plain receive takes."""
    mesh, routes = line(2)
    routes.add_path(0, [0, 1])
    calls = [("send", 0, 0, 0, 0, 5), ("recv", 1, 0, 0, 64, 5, "fp32", stride)]
    mem = random_memory(2)
    run = lockstep(mesh, spec_with(4, 1), routes, calls, mem)
    got = run.mem[1, 64 : 64 + 5 * stride]
    np.testing.assert_array_equal(got[::stride], mem[0, :5])
    for gap in range(1, stride):
        np.testing.assert_array_equal(got[gap::stride], mem[1, 64 + gap : 64 + 5 * stride : stride])
    assert run.cycles == POINT_TO_POINT[0][4] + 4  # 1 hop, five words: as a plain receive


def stretched(mesh: Mesh, hops: dict[tuple[int, int], int]) -> Mesh:
    """``mesh`` with the wire from PE ``a`` to its east or south neighbour ``b`` (keys
    ``(a, b)``) stretched over so many physical hops, both ends alike."""
    table = np.ones((mesh.height, mesh.width, 4), np.int64)
    for (a, b), h in hops.items():
        d = E if b == a + 1 else S
        table[a // mesh.width, a % mesh.width, d] = h
        table[b // mesh.width, b % mesh.width, (d + 2) % 4] = h
    return Mesh(mesh.width, mesh.height, mesh.alive, mesh.dead_link, table)


#   link hops  latency  depth  words  cycles
STRETCHED = [
    ((1, 3, 1), 1, 4, 4, 12),  # s + 1 + 5 L + n
    ((1, 3, 1), 1, 4, 5, 15),  # four wavelets per 6-cycle credit round trip on the long wire
    ((2, 1, 1), 2, 4, 3, 14),
    ((4, 1), 1, 2, 6, 26),  # two wavelets per 8-cycle round trip: they leave at 3, 4, 11, ..., 20
]


@pytest.mark.parametrize(("hops", "latency", "depth", "words", "cycles"), STRETCHED)
def test_a_stretched_link_costs_its_physical_hops(hops, latency, depth, words, cycles):
    """A wavelet (and a credit) takes h hop latencies over a link repair stretched over h
    physical hops: s + 1 + (sum of h) L + n, or D wavelets per credit round trip."""
    mesh, routes = line(len(hops) + 1)
    mesh = stretched(mesh, {(i, i + 1): h for i, h in enumerate(hops)})
    routes.add_path(0, list(range(len(hops) + 1)))
    calls = [("send", 0, 0, 0, 0, words), ("recv", len(hops), 0, 0, 64, words)]
    mem = random_memory(len(hops) + 1)
    spec = spec_with(depth, latency)
    run = lockstep(mesh, spec, routes, calls, mem)
    assert run.cycles == cycles
    prog, _ = build_programs(mesh, spec, 1, 1, calls)
    assert simulate(mesh, spec, routes, prog, mem, max_cycles=1000).cycles == cycles


#   latency  depth  slow leaf's fmacs length m  cycles
MULTICAST = [
    (1, 4, 0, 13),  # all leaves recv: s + 1 + 2L + n
    (3, 2, 0, 29),  # credit-bound: the centre forwards at 6, 7, 12, 13, ..., 24, 25
    (1, 2, 3, 45),  # one leaf takes s + 3 = 5 cycles a wavelet: s + 1 + 2L + 5n
    (2, 1, 2, 39),  # s + 2 = 4 cycles a wavelet, as the credits' round trip: s + 1 + 2L + 4n
]


@pytest.mark.parametrize(("latency", "depth", "m", "cycles"), MULTICAST)
def test_multicast_tree_of_fan_out_three(latency, depth, m, cycles):
    """A head is copied once to each output of its route and leaves when all have it."""
    n = 8
    mesh = Mesh.full(3, 3)
    routes = ColorRoutes(mesh, 1)
    leaves = (1, 5, 7)  # N, E and S of the centre
    for leaf in leaves:
        routes.add_path(0, [3, 4, leaf])
    calls = [("send", 3, 0, 0, 0, n)]
    calls += [("recv", leaf, 0, 0, 64, n) for leaf in leaves[:2]]
    slow = ("fmacs", 7, 0, 0, 64, 80, m, n) if m else ("recv", 7, 0, 0, 64, n)
    mem = random_memory(9)
    run = lockstep(mesh, spec_with(depth, latency), routes, [*calls, slow], mem)
    assert run.cycles == cycles
    flits = run.ref.state()["link_flits"]
    assert flits[4, N] == flits[4, E] == flits[4, S] == flits[3, E] == n
    for leaf in leaves[:2]:
        np.testing.assert_array_equal(run.mem[leaf, 64 : 64 + n], mem[3, :n])


def test_two_streams_merging_share_the_output_round_robin():
    """Two inputs wanting one output take turns: round-robin over port * colors + color."""
    n = 6
    mesh = Mesh.full(3, 3)
    routes = ColorRoutes(mesh, 2)
    routes.add_path(0, [1, 4, 5])  # from the north, color 0: candidate 0 * 2 + 0 = 0
    routes.add_path(1, [3, 4, 5])  # from the west, color 1: candidate 3 * 2 + 1 = 7
    calls = [
        ("send", 1, 0, 0, 0, n),
        ("send", 3, 0, 1, 0, n),
        ("recv", 5, 0, 0, 64, n),
        ("recv", 5, 1, 1, 80, n),
    ]
    mem = random_memory(9)
    run = lockstep(mesh, spec_with(depth=2), routes, calls, mem, tasks=2)
    merged = [(t, "NESWR"[p]) for t, pe, out, p, _ in run.ref.grants if pe == 4 and out == E]
    assert merged == [(4 + i, "NW"[i % 2]) for i in range(2 * n)]
    assert run.cycles == STARTUP + 1 + 2 + 2 * n  # the shared link carries 2n wavelets
    np.testing.assert_array_equal(run.mem[5, 64 : 64 + n], mem[1, :n])
    np.testing.assert_array_equal(run.mem[5, 80 : 80 + n], mem[3, :n])


#   depth  latency  fmacs length m  words  cycles
BACKPRESSURE = [
    (1, 1, 4, 16, 101),  # consumer-bound: s + 1 + 2L + (s + m) n (more words than the
    (2, 1, 4, 16, 101),  #   path holds: the core's input queue of its first color takes six)
    (1, 3, 2, 10, 67),  # credit-bound: one wavelet per 2L = 6 cycles, arriving at 9 + 6k,
    #                     the last one's s + m = 4 cycles end at 67
    (2, 3, 2, 10, 49),  # two credits keep up with 4 cycles a wavelet: s + 1 + 2L + 4n
]


@pytest.mark.parametrize(("depth", "latency", "m", "words", "cycles"), BACKPRESSURE)
def test_backpressure_from_a_slow_fmacs_consumer(depth, latency, m, words, cycles):
    """A slow consumer fills every queue back to the sender, which then stalls; nothing is lost."""
    mesh, routes = line(3)
    routes.add_path(0, [0, 1, 2])
    calls = [("send", 0, 0, 0, 0, words), ("fmacs", 2, 0, 0, 0, 64, m, words)]
    mem = random_memory(3)
    mem[2, :m] = 0.0
    run = lockstep(mesh, spec_with(depth, latency), routes, calls, mem)
    assert run.cycles == cycles
    state = run.ref.state()
    if latency == 1:  # consumer-bound: the whole path filled up at some cycle
        full = [q[0, RAMP, 0] == q[1, W, 0] == q[2, W, 0] == depth for q in run.q_count]
        assert any(full)
        assert state["pe_stalls"][0] > 0
    assert state["link_flits"][0, E] == state["link_flits"][2, RAMP] == words
    expected = mem[2, 64 : 64 + m * words].reshape(words, m).T.astype(np.float64) @ mem[0, :words]
    np.testing.assert_allclose(run.mem[2, :m], expected, rtol=1e-5, atol=1e-5)


#   latency  depth  cycles
CHAIN = [
    (1, 4, 30),
    (3, 8, 36),
    (3, 4, 42),  # D < 2L: the last 2 of 6 wavelets wait for credits, 2 cycles per stage
]


@pytest.mark.parametrize(("latency", "depth", "cycles"), CHAIN)
def test_two_color_chain_reduction(latency, depth, cycles):
    """recv_add then send down a chain: each stage adds m + startup + 1 + L cycles."""
    length, m = 4, 6
    mesh, routes = line(length, colors=2)
    calls = []
    for pe in range(length - 1, 0, -1):
        color = pe % 2  # alternate colors so neighbouring links do not share a queue
        routes.add_path(color, [pe, pe - 1])
        if pe < length - 1:
            calls.append(("recv_add", pe, 0, (pe + 1) % 2, 0, m))
        calls.append(("send", pe, 0, color, 0, m))
    calls.append(("recv_add", 0, 0, 1, 0, m))
    mem = random_memory(length)
    run = lockstep(mesh, spec_with(depth, latency), routes, calls, mem)
    assert run.cycles == cycles
    if depth >= 2 * latency:  # the last recv_add ends at (2 + L + m) + 2 (m + 3 + L)
        assert cycles == 9 + 3 * latency + 3 * m
    expected = mem[:, :m].astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(run.mem[0, :m], expected, rtol=1e-5)


def test_local_ops_and_concurrent_tasks():
    """Tasks on one PE run side by side; vadd, vscale and vfma cost m cycles after startup."""
    mesh, routes = line(2)
    routes.add_path(0, [0, 1])
    calls = [
        ("send", 0, 0, 0, 0, 5),
        ("vscale", 0, 1, 40, 8, 2.5, 1),
        ("vadd", 0, 1, 50, 0, 8, 6),
        ("recv", 1, 0, 0, 64, 5),
        ("vfma", 1, 1, 90, 0, 8, 1),
        ("vfma", 1, 1, 100, 0, 8, 3),
    ]
    mem = random_memory(2)
    run = lockstep(mesh, spec_with(), routes, calls, mem, tasks=2)
    assert run.cycles == STARTUP + 1 + STARTUP + 6  # PE 0 task 1: vscale (1), vadd (6)
    np.testing.assert_array_equal(run.mem[0, 40], mem[0, 8] * np.float32(2.5))


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_wait_matmul_and_blocked_fmacs_across_tasks(dtype):
    """A task waits for another's ops; matmul costs k FMACs of length m per column; fmacs
    over blocks accumulates column by column: engine and reference agree cycle by cycle."""
    mesh, routes = line(2)
    routes.add_path(0, [0, 1])
    calls = [
        ("send", 0, 0, 0, 0, 6, dtype),
        ("fmacs", 1, 0, 0, 40, 0, 2, 3, dtype, 2),  # 6 values: 2 blocks of 3 rows
        ("wait", 1, 1, 0, 1),
        ("matmul", 1, 1, 60, 8, 16, 3, 2, 4, dtype),
        ("vadd", 1, 0, 80, 40, 60, 4),
    ]
    run = lockstep(mesh, spec_with(), routes, calls, random_memory(2, 5, dtype), tasks=2)
    assert run.cycles > 0


#   receiver  values  m  cycles
FP16_STREAMS = [
    ("recv", 7, 1, 8),  # ceil(7/2) = 4 wavelets: s + 1 + L + 4
    ("recv_add", 7, 1, 8),  # the pad half of the last wavelet is added too
    ("fmacs", 9, 3, 44),  # 5 wavelets of two instructions, s + 2 each (3 FMACs write 12 bytes)
    ("fmacs", 4, 2, 16),  # 2 wavelets of two instructions of s + 1: popped at 4 and 10
]


@pytest.mark.parametrize(("receiver", "values", "m", "cycles"), FP16_STREAMS)
def test_fp16_stream_carries_two_values_per_wavelet(receiver, values, m, cycles):
    """fp16 ops move two values a wavelet, compute in fp32 and round what they store."""
    mesh, routes = line(2)
    routes.add_path(0, [0, 1])
    recv = (
        ("fmacs", 1, 0, 0, 0, 64, m, values)
        if receiver == "fmacs"
        else (receiver, 1, 0, 0, 8, values)
    )
    calls = [("send", 0, 0, 0, 0, values, "fp16"), (*recv, "fp16")]
    run = lockstep(mesh, spec_with(), routes, calls, random_memory(2, 1, "fp16"))
    assert run.cycles == cycles


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_scaled_recv_add_is_one_instruction_over_the_stream(dtype):
    """recv_add with a scale adds each wavelet times it, one wavelet a cycle (the fabric as
    a vector operand: no instruction a wavelet), engine and reference alike."""
    values, scale = 6, -2.5
    mesh, routes = line(2)
    routes.add_path(0, [0, 1])
    mem = random_memory(2, 3, dtype)
    calls = [("send", 0, 0, 0, 0, values, dtype), ("recv_add", 1, 0, 0, 8, values, dtype, scale)]
    run = lockstep(mesh, spec_with(), routes, calls, mem)
    wavelets = values if dtype == "fp32" else values // 2
    assert run.cycles == STARTUP + 1 + 1 + wavelets  # s + 1 + L + a cycle a wavelet
    if dtype == "fp32":
        want = mem[1, 8 : 8 + values] + mem[0, :values] * np.float32(scale)
        np.testing.assert_array_equal(run.mem[1, 8 : 8 + values], want)


def test_arithmetic_takes_turns_and_moves_run_beside_it():
    """Two tasks' arithmetic on one PE runs one after the other (one datapath: task 0's vadd
    of 6 in cycles 2-7, then task 1's vscale of 4 in 8-11), while a third task's send
    streams beside it."""
    mesh, routes = line(2)
    routes.add_path(0, [0, 1])
    calls = [
        ("vadd", 0, 0, 40, 0, 10, 6),
        ("vscale", 0, 1, 50, 0, 2.0, 4),
        ("send", 0, 2, 0, 0, 5),
        ("recv", 1, 0, 0, 64, 5),
    ]
    run = lockstep(mesh, spec_with(), routes, calls, random_memory(2, 4), tasks=3)
    assert run.cycles == STARTUP + 6 + 4  # the receiver's last wavelet came at s + 1 + L + 5


def test_a_lower_task_number_comes_first_on_the_datapath():
    """Task 0's short vscale runs before task 1's long vadd, which waits for it: task 2's
    send after the vscale reaches PE 1 long before the vadd ends (2 + 10 cycles of
    arithmetic); in the other order the send would start only after both."""
    mesh, routes = line(2)
    routes.add_path(0, [0, 1])
    calls = [
        ("vadd", 0, 1, 40, 0, 10, 10),
        ("vscale", 0, 0, 50, 0, 2.0, 2),
        ("wait", 0, 2, 0, 1),
        ("send", 0, 2, 0, 50, 1),
        ("recv", 1, 0, 0, 64, 1),
    ]
    run = lockstep(mesh, spec_with(), routes, calls, random_memory(2, 4), tasks=3)
    assert run.cycles == STARTUP + 2 + 10


#   computes  waits  cycles: the vadd of 6 ends in cycle s + 5; the waiter's wait takes a cycle
#                    then (after it: a task stepped before the vadd's sees it a cycle later),
#                    its send's start-up, the send, then 1 + L to the receiver
WAITS_FOR_THE_LAST_CYCLE = [
    (0, 1, STARTUP + 5 + 1 + STARTUP + 1 + 1 + 1),
    (1, 0, STARTUP + 5 + 2 + STARTUP + 1 + 1 + 1),
]


def test_an_op_blocked_in_its_last_cycles_finishes_later():
    """Task 1's vadd is one element of 10 cycles; task 0's add of a wavelet that comes in
    meanwhile takes the datapath first, so the vadd's last cycle comes a cycle later, and
    so does the moment it counts as done (each cycle's counters agree)."""
    mesh, routes = line(2)
    routes.add_path(0, [0, 1])
    calls = [
        ("send", 0, 0, 0, 0, 1),
        ("recv_add", 1, 0, 0, 64, 1),
        ("vadd", 1, 1, 40, 0, 10, 10),
    ]
    lockstep(mesh, spec_with(), routes, calls, random_memory(2), tasks=2)


@pytest.mark.parametrize(("computes", "waits", "cycles"), WAITS_FOR_THE_LAST_CYCLE)
def test_a_wait_sees_the_awaited_op_only_after_its_last_cycle(computes, waits, cycles):
    """A task waiting for another's op of 6 cycles goes on only once all 6 have run (its
    send starts after them), not when the op's one element starts."""
    mesh, routes = line(2)
    routes.add_path(0, [0, 1])
    calls = [
        ("vadd", 0, computes, 40, 0, 10, 6),
        ("wait", 0, waits, computes, 1),
        ("send", 0, waits, 0, 40, 1),
        ("recv", 1, 0, 0, 64, 1),
    ]
    run = lockstep(mesh, spec_with(), routes, calls, random_memory(2), tasks=2)
    assert run.cycles == cycles


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_vaxpy_adds_a_vector_times_the_ops_scalar(dtype):
    """vaxpy of 5 values by 0.5 into 40: the same values and cycles as the reference, and
    as numpy; 5 fp32 FMACs take 5 cycles, 5 fp16 ones 2 (4 a cycle; 20 bytes read at 16 a
    cycle, 10 written at 8)."""
    mesh, routes = line(1)
    memory = random_memory(1, 3, dtype)
    run = lockstep(mesh, spec_with(), routes, [("vaxpy", 0, 0, 40, 8, 0.5, 5, dtype)], memory)
    if dtype == "fp32":
        want = memory[0, 40:45] + memory[0, 8:13] * np.float32(0.5)
        np.testing.assert_array_equal(run.mem[0, 40:45], want)
    assert run.cycles == STARTUP + {"fp32": 5, "fp16": 2}[dtype]


def test_a_local_op_opening_a_loop_iteration_pays_its_control():
    """vadd of 4 as one iteration of a scalar loop: start-up, the loop's 7 cycles of control
    (``pe.issue_cycles``), then its 4 elements."""
    mesh, routes = line(1)
    calls = [("vadd", 0, 0, 40, 0, 8, 4, "fp32", True)]
    run = lockstep(mesh, spec_with(issue_cycles=7), routes, calls, random_memory(1))
    assert run.cycles == STARTUP + 7 + 4


def test_fp16_local_ops_on_concurrent_tasks():
    """fp16 vadd and vscale of 9 values cost 3 cycles (8 bytes written a cycle), vfma 4; the
    four tasks share the PE's one datapath, so their ops run one after another."""
    mesh, routes = line(1)
    calls = [
        ("vadd", 0, 0, 40, 0, 10, 9, "fp16"),
        ("vscale", 0, 1, 50, 0, 0.3, 9, "fp16"),
        ("vfma", 0, 2, 60, 0, 10, 9, "fp16"),
        ("vfma", 0, 3, 70, 0, 10, 2),
    ]
    run = lockstep(mesh, spec_with(), routes, calls, random_memory(1, 2, "fp16"), tasks=4)
    # vfma reads 54 bytes at 16 a cycle; the fp32 vfma of 2 reads 24 bytes
    assert run.cycles == STARTUP + 3 + 3 + 4 + 2


def test_reference_pays_compute_cost_before_the_next_op():
    """In the reference an op's last element costs its full cycles before the next startup."""
    mesh, routes = line(1)
    for calls, cycles in [
        ([("vadd", 0, 0, 40, 0, 8, 4)], STARTUP + 4),
        ([("vadd", 0, 0, 40, 0, 8, 4), ("vadd", 0, 0, 50, 0, 8, 1)], STARTUP + 4 + STARTUP + 1),
        ([("vadd", 0, 0, 50, 0, 8, 1), ("vadd", 0, 0, 40, 0, 8, 4)], STARTUP + 1 + STARTUP + 4),
    ]:
        _, ref_prog = build_programs(mesh, SPEC, 1, 1, calls)
        ref = ReferenceFabric.for_program(mesh, SPEC, routes.table, ref_prog, random_memory(1))
        assert ref.run(100) == ("done", cycles)


def test_deadlock_cycle_agrees():
    """Routes whose wavelets get stuck deadlock from the same cycle in engine and reference
    (the engine's route check, which would refuse them, is off)."""
    mesh = Mesh.full(2, 2)
    routes = ColorRoutes(mesh, 1)
    routes.add(0, RAMP, 0, (E,))
    ring = [0, 1, 3, 2, 0]
    for here, there in zip(ring, ring[1:], strict=False):
        routes.add_path(0, [here, there], deliver=False)
    spec = spec_with(depth=2, latency=2)
    prog, ref_prog = build_programs(mesh, spec, 1, 1, [("send", 0, 0, 0, 0, 20)])
    ref = ReferenceFabric.for_program(mesh, spec, routes.table, ref_prog, random_memory(4))
    status, cycle = ref.run(1000)
    assert status == "deadlock"
    with pytest.raises(DeadlockError, match=f"no progress from cycle {cycle} "):
        simulate(mesh, spec, routes, prog, random_memory(4), max_cycles=1000, check_routes=False)


# ---------------------------------------------------------------------------------------
# Engine bugs this reference found (fixed): kept as regression tests


def test_compute_cost_is_paid_before_the_next_op():
    """vadd of 4 then vadd of 1 takes s + 4 + s + 1 cycles, more than vadd of 4 alone."""
    mesh, routes = line(1)
    calls = [("vadd", 0, 0, 40, 0, 8, 4), ("vadd", 0, 0, 50, 0, 8, 1)]
    prog, ref_prog = build_programs(mesh, SPEC, 1, 1, calls)
    ref = ReferenceFabric.for_program(mesh, SPEC, routes.table, ref_prog, random_memory(1))
    assert ref.run(100) == ("done", 2 * STARTUP + 4 + 1)
    result = simulate(mesh, SPEC, routes, prog, random_memory(1), max_cycles=100)
    assert result.cycles == 2 * STARTUP + 4 + 1


@pytest.mark.parametrize("latency", [1, 3])
def test_unreceived_wavelet_is_a_deadlock_at_any_latency(latency):
    """A wavelet nobody receives is a deadlock, whatever the hop latency."""
    mesh, routes = line(2)
    routes.add_path(0, [0, 1])
    spec = spec_with(latency=latency)
    prog, ref_prog = build_programs(mesh, spec, 1, 1, [("send", 0, 0, 0, 0, 1)])
    ref = ReferenceFabric.for_program(mesh, spec, routes.table, ref_prog, random_memory(2))
    assert ref.run(100)[0] == "deadlock"
    with pytest.raises(DeadlockError):
        simulate(mesh, spec, routes, prog, random_memory(2), max_cycles=100)


# ---------------------------------------------------------------------------------------
# Wormhole (destination-routed) traffic

# One packet on an idle mesh: created at 0 and injected at once, one cycle into the
# router, h*L on the wires, F - 1 behind the head: latency h*L + F.
#   width height pattern    yx    source hops flits latency cycles
ZERO_LOAD = [
    (4, 1, "neighbor", False, 3, 3, 4, 1, 7),
    (4, 1, "neighbor", False, 3, 3, 2, 3, 11),
    (3, 3, "bitcomp", False, 0, 4, 2, 2, 10),
    (3, 3, "transpose", True, 2, 4, 3, 1, 7),
    (2, 2, "transpose", False, 0, 0, 2, 1, 2),
]


@pytest.mark.parametrize(
    ("width", "height", "pattern", "yx", "source", "hops", "flits", "latency", "cycles"),
    ZERO_LOAD,
)
def test_single_packet_zero_load_latency(
    width, height, pattern, yx, source, hops, flits, latency, cycles
):
    """A lone packet of F flits over h hops arrives h*L + F cycles after it was created."""
    spec = spec_with(depth=2, latency=latency)
    ref = lockstep_traffic(width, height, spec, pattern, flits, {source: [0]}, 20, yx)
    state = ref.state()
    assert state["packets"].sum() == 1
    assert state["latency_sum"].sum() == cycles == hops * latency + flits
    assert state["hops"][source] == hops


def test_traffic_takes_a_stretched_link_as_one_hop():
    """Synthetic traffic takes every link as one hop, also one that repair stretched over 3
    (engine and reference in lockstep): a lone packet of 3 flits over it arrives L + 3
    cycles after it was created, and the summary counts the link."""
    spec = spec_with(depth=4, latency=2)
    ref = lockstep_traffic(4, 1, spec, "neighbor", 3, {0: [0]}, 20, hops={(0, 1): 3})
    assert ref.state()["latency_sum"].sum() == 2 + 3
    cfg = TrafficConfig(4, 1, "uniform", 0.1, 2, cycles=50, warmup=10)
    mesh = stretched(Mesh.full(4, 1), {(0, 1): 3, (2, 3): 2})
    assert run_traffic(cfg, spec, mesh)["stretched_links_as_one_hop"] == 2


def test_wormhole_packet_holds_its_output_until_the_tail():
    """Two packets wanting one output pass one after the other, never flit by flit."""
    # transpose on 3x3, XY: PE 1 -> PE 3 leaves PE 1 west at once; PE 2 -> PE 6 reaches
    # PE 1 from the east a cycle later and waits for the whole first packet.
    ref = lockstep_traffic(3, 3, spec_with(depth=2), "transpose", 4, {1: [0], 2: [0]}, 30)
    at_pe1_west = [(t, "NESWR"[p]) for t, pe, out, p, _ in ref.grants if pe == 1 and out == W]
    assert at_pe1_west == [(1 + i, "R") for i in range(4)] + [(5 + i, "E") for i in range(4)]
    state = ref.state()
    assert state["packets"].tolist() == [0, 1, 1]  # delivered in rows 1 (PE 3) and 2 (PE 6)
    assert state["latency_sum"].tolist() == [0, 2 + 4, 4 + 4 + 3]  # PE 2's head waited 3


#   width height pattern     yx     depth latency flits warmup
SATURATED = [
    (4, 1, "neighbor", False, 1, 1, 3, 0),
    (3, 3, "transpose", False, 2, 1, 4, 0),
    (3, 3, "transpose", True, 1, 2, 2, 10),
    (4, 4, "bitcomp", False, 2, 2, 3, 0),
    (4, 4, "bitcomp", True, 4, 1, 1, 20),
    (4, 2, "neighbor", True, 3, 3, 5, 0),
]


@pytest.mark.parametrize(
    ("width", "height", "pattern", "yx", "depth", "latency", "flits", "warmup"), SATURATED
)
def test_saturated_wormhole_traffic_in_lockstep(
    width, height, pattern, yx, depth, latency, flits, warmup
):
    """Every PE injecting as fast as it can: the engine matches the reference cycle by cycle."""
    schedule = {pe: list(range(80)) for pe in range(width * height)}
    spec = spec_with(depth, latency)
    ref = lockstep_traffic(width, height, spec, pattern, flits, schedule, 80, yx, warmup)
    assert sum(ref.delivered) > 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    size=st.sampled_from([(2, 1), (3, 1), (2, 2), (3, 3), (4, 2)]),
    pattern=st.sampled_from(["transpose", "bitcomp", "neighbor"]),
    yx=st.booleans(),
    depth=st.integers(1, 4),
    latency=st.integers(1, 3),
    flits=st.integers(1, 4),
    data=st.data(),
)
def test_random_packet_schedules_in_lockstep(size, pattern, yx, depth, latency, flits, data):
    """Random packet schedules on deterministic patterns: engine and reference agree."""
    width, height = size
    times = st.lists(st.integers(0, 30), max_size=5).map(sorted)
    schedule = {pe: data.draw(times) for pe in range(width * height)}
    spec = spec_with(depth, latency)
    lockstep_traffic(width, height, spec, pattern, flits, schedule, 60, yx)


# ---------------------------------------------------------------------------------------
# Random programs on random multicast trees

GRID = 3


def grow_tree(data, source: int, size: int) -> dict[int, list[int]]:
    """A random tree of ``size`` more PEs hanging off ``source``: parent -> children."""
    children: dict[int, list[int]] = {source: []}
    while len(children) < size + 1:
        here = data.draw(st.sampled_from(sorted(children)))
        x, y = here % GRID, here // GRID
        steps = [(x + dx, y + dy) for dx, dy in ((0, -1), (1, 0), (0, 1), (-1, 0))]
        free = [
            b * GRID + a
            for a, b in steps
            if 0 <= a < GRID and 0 <= b < GRID and b * GRID + a not in children
        ]
        if free:
            there = data.draw(st.sampled_from(free))
            children[here].append(there)
            children[there] = []
    return children


def route_tree(routes: ColorRoutes, color: int, children, source: int, receivers) -> None:
    def visit(here: int, in_port: int) -> None:
        for there in children[here]:
            out = {-GRID: N, 1: E, GRID: S, -1: W}[there - here]
            routes.add(here, in_port, color, (out,))
            visit(there, (out + 2) % 4)
        if here in receivers:
            routes.add(here, in_port, color, (RAMP,))

    visit(source, RAMP)


def split(data, wavelets: int) -> list[tuple[int, int]]:
    """Cut a stream of so many wavelets into 1 to 3 ops: (first wavelet, wavelets)."""
    cuts = (
        sorted(data.draw(st.sets(st.integers(1, wavelets - 1), max_size=2))) if wavelets > 1 else []
    )
    bounds = [0, *cuts, wavelets]
    return [(lo, hi - lo) for lo, hi in zip(bounds, bounds[1:], strict=False)]


def values_in(data, wavelets: int, dtype: str) -> int:
    """Values an op of so many wavelets may move: fp16 fills the last one or not."""
    return 2 * wavelets - data.draw(st.integers(0, 1)) if dtype == "fp16" else wavelets


def receiver_calls(data, pe: int, color: int, wavelets: int, dtype: str) -> list[tuple]:
    """recv / recv_add / fmacs ops for the stream, maybe a local op after them."""
    ops = []
    for lo, count in split(data, wavelets):
        kind = data.draw(st.sampled_from(["recv", "recv_add", "fmacs"]))
        ops.append([kind, lo, values_in(data, count, dtype), data.draw(st.integers(1, 3))])
    local = data.draw(st.sampled_from([None, "vadd", "vscale", "vfma", "vaxpy"]))
    dst, acc, mat = 16 + 16 * color, 48 + 4 * color, 64 + 32 * color
    calls = []
    for kind, lo, values, m in ops:
        if kind == "fmacs" and values % 2 == 0 and data.draw(st.booleans()):  # two blocks
            calls.append(("fmacs", pe, color, color, acc, mat, m, values // 2, dtype, 2))
        elif kind == "fmacs":
            calls.append(("fmacs", pe, color, color, acc, mat, m, values, dtype))
        else:
            calls.append((kind, pe, color, color, dst + lo, values, dtype))
    m = data.draw(st.integers(1, 4))
    if local in ("vscale", "vaxpy"):
        calls.append((local, pe, color, dst, 0, -1.5, m, dtype))
    elif local is not None:
        calls.append((local, pe, color, dst, 0, 4, m, dtype))
    return calls


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    trees=st.integers(1, 2),
    dtype=st.sampled_from(["fp32", "fp16"]),
    depth=st.integers(1, 4),
    latency=st.integers(1, 3),
    pe_knobs=st.fixed_dictionaries(  # wide enough that an op on one element costs one cycle
        {
            "op_startup_cycles": st.integers(0, 3),
            "fp32_fmac_per_cycle": st.sampled_from([1, 2]),
            "fp16_fmac_per_cycle": st.sampled_from([2, 4, 8]),
            "sram_read_bytes_per_cycle": st.sampled_from([16, 32, 64]),
            "sram_write_bytes_per_cycle": st.sampled_from([8, 16, 64]),
        }
    ),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
@pytest.mark.slow
def test_random_multicast_programs_in_lockstep(trees, dtype, depth, latency, pe_knobs, seed, data):
    """Random multicast trees, op mixes, lengths, PE specs and stretched links on a 3x3
    grid agree."""
    wires = [(a, a + 1) for a in range(GRID * GRID) if a % GRID < GRID - 1]
    wires += [(a, a + GRID) for a in range(GRID * (GRID - 1))]
    long = data.draw(st.dictionaries(st.sampled_from(wires), st.integers(2, 4), max_size=3))
    mesh = stretched(Mesh.full(GRID, GRID), long)
    routes = ColorRoutes(mesh, 2)
    calls = []
    for color in range(trees):  # one tree, sender task and receiver tasks per color
        source = data.draw(st.integers(0, GRID * GRID - 1))
        children = grow_tree(data, source, data.draw(st.integers(1, 5)))
        leaves = {pe for pe, kids in children.items() if not kids}
        inner = sorted(set(children) - leaves - {source})
        extra = st.lists(st.sampled_from(inner), unique=True) if inner else st.just([])
        receivers = leaves | set(data.draw(extra))
        route_tree(routes, color, children, source, receivers)
        wavelets = data.draw(st.integers(1, 8))
        for lo, count in split(data, wavelets):
            values = values_in(data, count, dtype)
            calls.append(("send", source, color, color, lo, values, dtype))
        for pe in sorted(receivers):
            calls += receiver_calls(data, pe, color, wavelets, dtype)
    memory = random_memory(9, seed, dtype)
    spec = spec_with(depth, latency, **pe_knobs)
    lockstep(mesh, spec, routes, calls, memory, tasks=2)


@pytest.mark.parametrize(("in_queue", "out_queue", "held", "sent"), [(4, 2, 2, 6), (1, 1, 6, 2)])
def test_a_stream_through_queues_its_program_binds(in_queue, out_queue, held, sent):
    """The slow consumer reads on the input queue its program binds and the sender writes
    into the output queue its program binds: both fill to those queues' depths (``held``,
    ``sent``), engine and reference agreeing cycle by cycle, and the result is the same."""
    mesh, routes = line(3)
    routes.add_path(0, [0, 1, 2])
    calls = [("send", 0, 0, 0, 0, 24), ("fmacs", 2, 0, 0, 0, 32, 4, 24),
             ("bind_queue", 2, 0, in_queue), ("bind_queue", 0, 0, out_queue, True)]  # fmt: skip
    mem = random_memory(3)
    mem[2, :4] = 0.0
    run = lockstep(mesh, spec_with(2, 1), routes, calls, mem)
    expected = mem[2, 32 : 32 + 4 * 24].reshape(24, 4).T.astype(np.float64) @ mem[0, :24]
    np.testing.assert_allclose(run.mem[2, :4], expected, rtol=1e-5, atol=1e-5)
    assert run.ref.receive_depth[2, 0] == held
    assert run.ref.send_depth[0, 0] == sent
    assert max(q[0, RAMP, 0] for q in run.q_count) == sent


@pytest.mark.parametrize(("depth", "latency", "m"), [(1, 1, 0), (2, 3, 3), (4, 1, 6)])
def test_filtered_streams_in_lockstep(depth, latency, m):
    """PE 0 streams 18 words east along a row of four; PEs 1 and 2 route them to their ramp and
    on, PE 3 to its ramp alone. PE 1's counter filter takes blocks of 3 in periods of 9 from
    its count 6 (6 of the 18), PE 2's takes one of every 3 (6), PE 3's range filter the words
    whose upper 16 bits lie in [4, 9] (the rest it drops). PE 3 consumes slowly (an fmacs of
    ``m``, or plain receives): engine and reference agree cycle by cycle through the
    back-pressure, and each PE holds the words its filter picks."""
    mesh, routes = line(4)
    routes.add(0, RAMP, 0, (E,))
    routes.add(1, W, 0, (RAMP, E))
    routes.add(2, W, 0, (RAMP, E))
    routes.add(3, W, 0, (RAMP,))
    routes.counter_filter(1, 0, max_counter=2, limit1=8, init_counter=6)
    routes.counter_filter(2, 0, max_counter=0, limit1=2)
    routes.range_filter(3, 0, min_idx=4, max_idx=9)
    slow = ("fmacs", 3, 0, 0, 0, 64, m, 6) if m else ("recv", 3, 0, 0, 64, 6)
    calls = [("send", 0, 0, 0, 0, 18), ("recv", 1, 0, 0, 64, 6), ("recv", 2, 0, 0, 64, 6), slow]
    mem = random_memory(4)
    mem[0, :18] = (np.arange(18, dtype=np.uint32) << 16 | 7).view(np.float32)
    run = lockstep(mesh, spec_with(depth, latency), routes, calls, mem)
    index = run.mem[:, 64:70].view(np.uint32) >> 16
    assert index[1].tolist() == [3, 4, 5, 12, 13, 14]
    assert index[2].tolist() == [0, 3, 6, 9, 12, 15]
    if not m:
        assert index[3].tolist() == [4, 5, 6, 7, 8, 9]
    flits = run.ref.state()["link_flits"]
    assert flits[:3, E].tolist() == [18, 18, 18]
    assert flits[1:, RAMP].tolist() == [6, 6, 6]


@pytest.mark.parametrize(("depth", "latency", "pop"), [(1, 1, "always"), (2, 3, "on_advance"),
                                                        (4, 1, "none")])  # fmt: skip
def test_control_wavelets_in_lockstep(depth, latency, pop):
    """PE 0 streams words east along a row of five, a control wavelet after every third;
    PEs 1-3 route the color to their ramp and on (position 0) or on alone (position 1), in
    ring mode, PE 4 to its ramp. The commands advance a different router each time (how
    the SDK's stencil moves two or three switches with one wavelet); PE 2 filters what it
    takes. Engine and reference agree cycle by cycle, through back-pressure from a slow
    last PE, on each switch's moves and every count."""
    mesh, routes = line(5)
    routes.add(0, RAMP, 0, (E,))
    for pe in (1, 2, 3):
        routes.add(pe, W, 0, (RAMP, E))
    forward = np.zeros(5, np.int64)
    forward[W] = 1 << E
    routes.switch_positions([1, 2, 3], 0, [forward], ring_mode=True, pop_mode=pop)
    routes.switch_positions(0, 0, [], pop_mode=pop)
    routes.add(4, W, 0, (RAMP,))
    routes.counter_filter(2, 0, max_counter=1, limit1=2)  # two of every three data words
    commands = [[0, 1], [1, 0, 1], [0, 0, 0, 1], [1, 1, 1]]
    calls = []
    for k, command in enumerate(commands):
        calls += [("send", 0, 0, 0, 3 * k, 3), ("control", 0, 0, 0, command)]
    calls.append(("send", 0, 0, 0, 12, 3))
    mem = random_memory(5)
    mem[0, :15] = np.arange(15)
    # what each PE takes: every run of three words its router hands it (position 0)
    taken = _control_chain_takes(commands, pop)
    calls += [("recv", pe, 0, 0, 64, len(taken[pe])) for pe in (1, 2, 3)]
    calls.append(("fmacs", 4, 0, 0, 0, 64, 3, 15))
    run = lockstep(mesh, spec_with(depth, latency), routes, calls, mem)
    for pe in (1, 2, 3):
        assert run.mem[pe, 64 : 64 + len(taken[pe])].tolist() == taken[pe]


def _control_chain_takes(commands, pop):
    """The words PEs 1-3 take in ``test_control_wavelets_in_lockstep``, worked out apart:
    each block of three reaches every router; one at position 0 hands its PE the block
    (PE 2 the block's first two, its filter's); each control wavelet then moves the
    routers its commands name under ``pop``."""
    position = {1: 0, 2: 0, 3: 0}
    taken = {1: [], 2: [], 3: []}
    for k in range(len(commands) + 1):
        block = [3.0 * k, 3.0 * k + 1, 3.0 * k + 2]
        for pe in (1, 2, 3):
            if position[pe] == 0:
                taken[pe] += block[:2] if pe == 2 else block
        if k == len(commands):
            break
        queue = list(commands[k])
        for router in range(5):
            first = queue[0] if queue else 0
            moved = first == 1 and router in position
            if moved:
                position[router] ^= 1
            if pop == "always" or (pop == "on_advance" and moved):
                queue = queue[1:]
    return taken


@pytest.mark.parametrize("stride", [0, -1, 1.5, True])
def test_a_bad_receive_stride_is_refused_with_one_line(stride):
    builder = ProgramBuilder(2, spec_with(4, 1).pe, 1)
    with pytest.raises(ConfigError, match=r"recv stride=.* must be an integer >= 1"):
        builder.recv(1, 0, 0, 0, 4, stride=stride)


def test_a_switch_a_control_wavelet_moves_takes_its_new_routes_after_the_cycle():
    """Router 4 of 3 x 3 takes color 0 from the west (position 0) or the north (1). PE 3
    sends it a control wavelet that ends there and advances it, and PE 1 a data wavelet from
    the north, both reaching it in one cycle: the router judges that cycle's heads under
    position 0 (the data waits), then takes the data under position 1, whatever order it
    scans its ports in; engine and reference agree cycle by cycle."""
    mesh = Mesh.full(3, 3)
    routes = ColorRoutes(mesh, 1)
    routes.add(3, RAMP, 0, (E,))
    routes.add(4, W, 0, (RAMP,))
    north = np.zeros(5, np.int64)
    north[N] = 1 << RAMP
    routes.switch_positions(4, 0, [north])
    routes.add(1, RAMP, 0, (S,))
    calls = [("control", 3, 0, 0, [1]), ("send", 1, 0, 0, 0, 1), ("recv", 4, 0, 0, 64, 1)]
    mem = random_memory(9)
    run = lockstep(mesh, spec_with(4, 1), routes, calls, mem)
    assert run.mem[4, 64] == mem[1, 0]
