"""The cycle engine: latency, values, backpressure, conservation, deadlock, determinism."""

import numpy as np
import pytest
from wafersim.fabric.channel_deps import RouteCycleError
from wafersim.fabric.engine import simulate
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.program import ProgramBuilder
from wafersim.fabric.routes import ColorRoutes
from wafersim.fabric.traffic import TrafficConfig, run_traffic
from wafersim.wafer.errors import ConfigError, DeadlockError
from wafersim.wafer.geometry import RAMP, E, N, S, W
from wafersim.wafer.presets import preset

SPEC = preset("tiny")
WORDS = 256


def line(length, spec=SPEC, colors=1):
    mesh = Mesh.full(length, 1)
    return mesh, ColorRoutes(mesh, colors), ProgramBuilder(length, spec.pe, colors)


def memory(pes, rng=None):
    rng = rng or np.random.default_rng(0)
    return rng.standard_normal((pes, WORDS)).astype(np.float32)


# Cycle-exact expectations for SEND of n words over h hops at hop latency L, with op startup
# s = 2: the first word enters the ramp queue at cycle s, leaves the router at s + 1, reaches
# the receiver at s + 1 + h*L and the last one n - 1 cycles later: s + 1 + h*L + n cycles.
#   hops  latency  words  cycles
POINT_TO_POINT = [
    (1, 1, 1, 5),
    (3, 1, 5, 11),
    (3, 2, 5, 14),
    (5, 1, 20, 28),
    (2, 4, 3, 14),
]


@pytest.mark.parametrize(("hops", "latency", "words", "cycles"), POINT_TO_POINT)
def test_point_to_point_cycles(hops, latency, words, cycles):
    """A stream over h hops takes startup + 1 + h*latency + n cycles and arrives intact."""
    spec = SPEC.replace({"link.hop_latency_cycles": latency})
    mesh, routes, prog = line(hops + 1, spec)
    routes.add_path(0, list(range(hops + 1)))
    prog.send(0, 0, 0, 0, words)
    prog.recv(hops, 0, 0, 100, words)
    mem = memory(hops + 1)
    result = simulate(mesh, spec, routes, prog.build(), mem, max_cycles=1000)
    assert result.cycles == cycles
    np.testing.assert_array_equal(result.mem[hops, 100 : 100 + words], mem[0, :words])


def test_multicast_tree_delivers_to_every_leaf():
    """One send on a multicast tree arrives, value for value, at every leaf."""
    mesh = Mesh.full(3, 3)
    routes = ColorRoutes(mesh, 1)
    centre = 4
    for leaf in (1, 3, 5, 7):
        routes.add_path(0, [centre, leaf])
    prog = ProgramBuilder(9, SPEC.pe, 1)
    prog.send(centre, 0, 0, 0, 16)
    for leaf in (1, 3, 5, 7):
        prog.recv(leaf, 0, 0, 50, 16)
    mem = memory(9)
    result = simulate(mesh, SPEC, routes, prog.build(), mem, max_cycles=1000)
    for leaf in (1, 3, 5, 7):
        np.testing.assert_array_equal(result.mem[leaf, 50:66], mem[centre, :16])
    assert result.link_flits.reshape(9, 5)[centre, :4].sum() == 4 * 16


def test_backpressure_loses_nothing_and_fmacs_matches_numpy():
    """A slow consumer stalls the sender; every wavelet arrives once and the FMACs are exact."""
    m, n = 8, 12
    mesh, routes, prog = line(3)
    routes.add_path(0, [0, 1, 2])
    prog.send(0, 0, 0, 0, n)
    prog.fmacs(2, 0, 0, acc=0, mat=16, m=m, n=n)
    mem = memory(3)
    mem[2, :m] = 0.0
    result = simulate(mesh, SPEC, routes, prog.build(), mem, max_cycles=10_000)
    expected = mem[2, 16 : 16 + m * n].reshape(n, m).T.astype(np.float64) @ mem[0, :n]
    np.testing.assert_allclose(result.mem[2, :m], expected, rtol=1e-5, atol=1e-5)
    flits = result.link_flits.reshape(3, 5)
    assert flits[0, E] == flits[1, E] == flits[2, RAMP] == n
    assert result.link_stalls.sum() > 0
    assert result.leftover_wavelets == 0
    assert result.cycles >= n * m  # compute-bound: m cycles per wavelet


def test_reduction_chain_adds_partial_sums():
    """recv_add along a chain sums every PE's vector, as numpy does."""
    length, m = 4, 6
    mesh, routes, prog = line(length, colors=2)
    for pe in range(length - 1, 0, -1):
        color = pe % 2  # alternate colors so neighbouring links do not share a queue
        routes.add_path(color, [pe, pe - 1])
        if pe < length - 1:
            prog.recv_add(pe, 0, (pe + 1) % 2, 0, m)
        prog.send(pe, 0, color, 0, m)
    prog.recv_add(0, 0, 1, 0, m)
    mem = memory(length)
    expected = mem[:, :m].astype(np.float64).sum(axis=0)
    result = simulate(mesh, SPEC, routes, prog.build(), mem, max_cycles=1000)
    np.testing.assert_allclose(result.mem[0, :m], expected, rtol=1e-5)


def test_local_vector_ops_match_numpy():
    """vadd, vscale and vfma compute what numpy computes."""
    mesh, routes, prog = line(1)
    prog.vadd(0, 0, 100, 0, 10, 8)
    prog.vscale(0, 0, 120, 0, 2.5, 8)
    prog.vfma(0, 0, 140, 0, 10, 8)
    mem = memory(1)
    a, b, c = mem[0, :8].copy(), mem[0, 10:18].copy(), mem[0, 140:148].copy()
    result = simulate(mesh, SPEC, routes, prog.build(), mem, max_cycles=1000)
    np.testing.assert_allclose(result.mem[0, 100:108], a + b, rtol=1e-6)
    np.testing.assert_allclose(result.mem[0, 120:128], a * np.float32(2.5), rtol=1e-6)
    np.testing.assert_allclose(result.mem[0, 140:148], c + a * b, rtol=1e-6)


def test_missing_sender_is_a_deadlock_naming_the_task():
    """A receive that nothing will satisfy raises DeadlockError with the cycle and PE."""
    mesh, routes, prog = line(2)
    routes.add_path(0, [0, 1])
    prog.send(0, 0, 0, 0, 3)
    prog.recv(1, 0, 0, 0, 5)
    with pytest.raises(DeadlockError, match=r"cycle \d+.*PE \(1,0\) task 0 recv color 0 at 3/5"):
        simulate(mesh, SPEC, routes, prog.build(), memory(2), max_cycles=1000)


def test_routing_cycle_is_a_deadlock_not_a_hang():
    """A ring of routes is refused before it runs; forced to run, it fills and is reported
    as a deadlock, not a hang."""
    mesh = Mesh.full(2, 2)
    routes = ColorRoutes(mesh, 1)
    # (pe, in-port, out-port) round the ring 0 -> 1 -> 3 -> 2 -> 0, entered from PE 0's ramp
    ring = [(0, RAMP, E), (1, W, S), (3, N, W), (2, E, N), (0, S, E)]
    for pe, in_port, out_port in ring:
        routes.add(pe, in_port, 0, (out_port,))
    prog = ProgramBuilder(4, SPEC.pe, 1)
    prog.send(0, 0, 0, 0, 100)
    with pytest.raises(
        RouteCycleError, match=r"cycle of 4 queues: .*PE \(1,0\) in W color 0 -> PE \(1,1\) in N"
    ):
        simulate(mesh, SPEC, routes, prog.build(), memory(4), max_cycles=100_000, strict=False)
    with pytest.raises(DeadlockError, match=r"PE \(1,0\) in-port W color 0 wants S \(no credit"):
        simulate(mesh, SPEC, routes, prog.build(), memory(4), max_cycles=100_000,
                 check_routes=False, strict=False)  # fmt: skip


def test_routes_through_dead_links_are_rejected():
    """A route over a dead wire is refused when it is built, naming the PE and link."""
    mesh = Mesh.full(3, 1)
    dead = mesh.dead_link.copy()
    dead[0, 1, E] = dead[0, 2, W] = True
    broken = Mesh(3, 1, mesh.alive, dead)
    with pytest.raises(ConfigError, match="pe=1 uses dead or missing link E"):
        ColorRoutes(broken, 1).add_path(0, [0, 1, 2])


@pytest.mark.parametrize("colors", [0, 65])
def test_color_counts_outside_the_wavelet_color_field_are_rejected(colors):
    """A wavelet's metadata holds 6 bits of color: route tables of 1 to 64 colors only."""
    with pytest.raises(ConfigError, match=rf"colors={colors} is out of range \[1, 64\]"):
        ColorRoutes(Mesh.full(2, 1), colors)


def test_program_sram_budget_is_enforced():
    """An op past the PE's SRAM names the bytes needed and available."""
    _, _, prog = line(1)
    with pytest.raises(ConfigError, match=r"needs 49156 bytes, available 49152"):
        prog.recv(0, 0, 0, 12288, 1)


def test_max_cycles_is_required_and_enforced():
    """A program that runs past max_cycles is an error, not a silent partial result."""
    mesh, routes, prog = line(2)
    routes.add_path(0, [0, 1])
    prog.send(0, 0, 0, 0, 50)
    prog.recv(1, 0, 0, 0, 50)
    with pytest.raises(ConfigError, match="max_cycles=10"):
        simulate(mesh, SPEC, routes, prog.build(), memory(2), max_cycles=10)


def test_zero_load_latency_is_hops_plus_packet_size():
    """At near-zero load packet latency is avg hops x hop latency + packet size."""
    for latency in (1, 2):
        spec = SPEC.replace({"link.hop_latency_cycles": latency})
        cfg = TrafficConfig(
            width=8, height=8, rate=0.002, packet_size=4, cycles=20_000, warmup=1000, seed=1
        )
        r = run_traffic(cfg, spec)
        expected = r["avg_hops"] * latency + 4
        assert r["avg_packet_latency_cycles"] == pytest.approx(expected, rel=0.03)


def test_throughput_respects_the_bisection_bound():
    """Accepted rate never exceeds 4/k and saturates within 0.6-1.0 of it with XY routing."""
    k = 8
    bound = 4 / k
    accepted = []
    for rate in (0.2, 0.35, 0.5, 0.8):
        cfg = TrafficConfig(
            width=k,
            height=k,
            rate=rate,
            packet_size=4,
            queue_depth=16,
            cycles=4000,
            warmup=1000,
            seed=2,
        )
        r = run_traffic(cfg, SPEC)
        assert r["accepted_rate"] <= bound
        accepted.append(r["accepted_rate"])
    assert 0.6 * bound <= max(accepted) <= bound
    assert run_traffic(TrafficConfig(width=k, height=k, rate=0.8, cycles=2000, warmup=500), SPEC)[
        "saturated"
    ]


@pytest.mark.slow
def test_traffic_is_deterministic_serial_or_parallel():
    """The same seed gives bit-identical statistics with one thread or two."""
    cfg = dict(width=8, height=8, rate=0.3, cycles=1500, warmup=300, seed=9)
    keys = (
        "accepted_rate",
        "avg_packet_latency_cycles",
        "p99_packet_latency_cycles",
        "avg_hops",
        "packets_measured",
    )
    one = run_traffic(TrafficConfig(**cfg), SPEC)
    again = run_traffic(TrafficConfig(**cfg), SPEC)
    two = run_traffic(TrafficConfig(**cfg, threads=2), SPEC)
    other = run_traffic(TrafficConfig(**{**cfg, "seed": 10}), SPEC)
    assert [one[k] for k in keys] == [again[k] for k in keys] == [two[k] for k in keys]
    assert [one[k] for k in keys] != [other[k] for k in keys]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("rate", 1.5),
        ("pattern", "zigzag"),
        ("routing", "west-first"),
        ("warmup", 5000),
        ("packet_size", 0),
        ("width", 0),
    ],
)
def test_bad_traffic_config_names_the_field(field, value):
    """Bad traffic parameters raise ConfigError naming the field."""
    with pytest.raises(ConfigError, match=field):
        TrafficConfig(**{field: value})


@pytest.mark.parametrize(("rate", "latency"), [(0.1, 1), (0.6, 1), (0.4, 3)])
def test_every_flit_is_delivered_once_or_still_in_flight(rate, latency):
    """Conservation: flits injected = flits ejected + flits still queued or on a wire."""
    spec = SPEC.replace({"link.hop_latency_cycles": latency})
    cfg = TrafficConfig(width=6, height=5, rate=rate, cycles=1500, warmup=100, seed=3)
    r = run_traffic(cfg, spec)
    assert r["flits_injected"] > 0
    assert r["flits_injected"] == r["flits_ejected"] + r["flits_in_flight"]


def test_trace_samples_add_up_to_the_counters(tmp_path):
    """Trace samples times their span sum to the link counters, and save to HDF5."""
    import h5py
    from wafersim.fabric.trace import TraceRecorder

    cfg = TrafficConfig(width=4, height=4, rate=0.2, cycles=1000, warmup=100, seed=5)
    trace = TraceRecorder(250, 4, 4)
    r = run_traffic(cfg, SPEC, trace=trace)
    assert trace.cycles == [250, 500, 750, 1000]
    total_ejected = sum(sample[..., RAMP].sum() * 250 for sample in trace.link)
    assert total_ejected == pytest.approx(r["flits_ejected"])
    path = tmp_path / "trace.h5"
    trace.save(path, {"seed": 5})
    with h5py.File(path) as f:
        assert f["link_utilization"].shape == (4, 4, 4, 5)
        assert f["pe_activity"].shape == (4, 4, 4)
        assert list(f["cycles"][:]) == [250, 500, 750, 1000]
    assert not list(tmp_path.glob(".*tmp"))


def test_a_traced_run_takes_the_cycles_of_an_untraced_one():
    """An op that runs through several trace chunks is not taken for a deadlock (a chunk
    used to see no event while a PE computed, and stopped), and the cycles do not change."""
    from wafersim.fabric.trace import TraceRecorder

    mesh, routes, prog = line(2)
    prog.vfma(0, 0, 0, 0, 0, 200)  # one op of ~200 cycles, then a send
    routes.add_path(0, [0, 1])
    prog.send(0, 0, 0, 0, 4)
    prog.recv(1, 0, 0, 100, 4)
    mem = memory(2)
    plain = simulate(mesh, SPEC, routes, prog.build(), mem.copy(), max_cycles=10_000)
    trace = TraceRecorder(10, 2, 1)
    traced = simulate(mesh, SPEC, routes, prog.build(), mem.copy(), max_cycles=10_000,
                      trace=trace)  # fmt: skip
    assert plain.cycles > 100
    assert traced.cycles == plain.cycles
    np.testing.assert_array_equal(traced.mem.flat, plain.mem.flat)


def test_heatmap_png_is_written(tmp_path):
    """The heatmap helper writes a PNG file."""
    from wafersim.plots.figures import wafer_heatmap

    path = tmp_path / "heat.png"
    wafer_heatmap(np.arange(12.0).reshape(3, 4), path, "test", "units")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fp16_conversion_matches_numpy_exactly():
    """The kernels' fp16 rounding equals numpy's astype(float16) for every fp16 bit pattern
    and for random float32 values across the whole range."""
    from numba import njit
    from wafersim.fabric._fp16 import float_to_half, half_to_float

    @njit
    def to_half(x, out):
        for i in range(x.size):
            out[i] = float_to_half(x[i])

    @njit
    def to_float(h, out):
        for i in range(h.size):
            out[i] = half_to_float(h[i])

    rng = np.random.default_rng(0)
    scale = np.float32(10.0) ** rng.integers(-9, 6, 50_000).astype(np.float32)
    x = rng.standard_normal(50_000).astype(np.float32) * scale
    x = np.concatenate(
        [x, np.array([0, -0.0, np.inf, -np.inf, 65504, 65520, 6e-8, 3e-8], np.float32)]
    )
    got = np.zeros(x.size, np.int64)
    to_half(x, got)
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(got, expected)
    bits = np.arange(65536, dtype=np.int64)
    back = np.zeros(65536, np.float32)
    to_float(bits, back)
    reference = bits.astype(np.uint16).view(np.float16).astype(np.float32)
    same = (back.view(np.uint32) == reference.view(np.uint32)) | np.isnan(reference)
    assert same.all()


def test_fp16_stream_moves_two_values_per_wavelet():
    """An fp16 send of n values takes ceil(n/2) wavelet cycles and arrives bit-exact."""
    from wafersim.fabric.program import pack_half, unpack_half

    n, hops = 7, 3
    mesh, routes, prog = line(hops + 1)
    routes.add_path(0, list(range(hops + 1)))
    prog.send(0, 0, 0, 0, n, dtype="fp16")
    prog.recv(hops, 0, 0, 100, n, dtype="fp16")
    mem = np.zeros((hops + 1, WORDS), np.float32)
    values = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    mem[0, :4] = pack_half(values)
    result = simulate(mesh, SPEC, routes, prog.build(), mem, max_cycles=1000)
    assert result.cycles == 2 + 1 + hops + 4  # startup + ramp + hops + ceil(7/2) wavelets
    received = unpack_half(result.mem[hops, 100:104], n)
    np.testing.assert_array_equal(received, values.astype(np.float16).astype(np.float32))


def test_fp16_fmacs_accumulates_in_fp32():
    """fp16 matrix and stream, fp32 accumulator: equals numpy on the fp16-rounded inputs."""
    from wafersim.fabric.program import pack_half

    m, n = 6, 9
    mesh, routes, prog = line(2)
    routes.add_path(0, [0, 1])
    prog.send(0, 0, 0, 0, n, dtype="fp16")
    prog.fmacs(1, 0, 0, acc=0, mat=16, m=m, n=n, dtype="fp16")
    rng = np.random.default_rng(2)
    x = rng.standard_normal(n).astype(np.float32)
    a = rng.standard_normal((n, m)).astype(np.float32)
    mem = np.zeros((2, WORDS), np.float32)
    mem[0, :5] = pack_half(x)
    mem[1, 16 : 16 + 27] = pack_half(a.reshape(-1))
    result = simulate(mesh, SPEC, routes, prog.build(), mem, max_cycles=10_000)
    x16 = x.astype(np.float16).astype(np.float64)
    a16 = a.astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(result.mem[1, :m], x16 @ a16, rtol=1e-5, atol=1e-5)


def test_fp16_local_ops_round_like_numpy():
    """fp16 vadd, vscale and vfma compute in fp32 and round each result to fp16."""
    from wafersim.fabric.program import pack_half, unpack_half

    m = 9
    mesh, routes, prog = line(1)
    prog.vadd(0, 0, 40, 0, 10, m, dtype="fp16")
    prog.vscale(0, 0, 60, 0, 0.3, m, dtype="fp16")
    prog.vfma(0, 0, 80, 0, 10, m, dtype="fp16")
    rng = np.random.default_rng(3)
    a, b, c = (rng.standard_normal(m).astype(np.float32) for _ in range(3))
    mem = np.zeros((1, WORDS), np.float32)
    mem[0, 0:5], mem[0, 10:15], mem[0, 80:85] = pack_half(a), pack_half(b), pack_half(c)
    result = simulate(mesh, SPEC, routes, prog.build(), mem, max_cycles=1000)

    def h(v):
        return np.asarray(v, np.float32).astype(np.float16).astype(np.float32)

    np.testing.assert_array_equal(unpack_half(result.mem[0, 40:45], m), h(h(a) + h(b)))
    np.testing.assert_array_equal(unpack_half(result.mem[0, 60:65], m), h(h(a) * np.float32(0.3)))
    np.testing.assert_array_equal(unpack_half(result.mem[0, 80:85], m), h(h(c) + h(a) * h(b)))


def test_fp16_recv_add_rounds_each_sum():
    """fp16 recv_add adds two values per wavelet in fp32 and stores fp16."""
    from wafersim.fabric.program import pack_half, unpack_half

    m = 5
    mesh, routes, prog = line(2)
    routes.add_path(0, [0, 1])
    prog.send(0, 0, 0, 0, m, dtype="fp16")
    prog.recv_add(1, 0, 0, 20, m, dtype="fp16")
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal(m).astype(np.float32), rng.standard_normal(m).astype(np.float32)
    mem = np.zeros((2, WORDS), np.float32)
    mem[0, :3], mem[1, 20:23] = pack_half(a), pack_half(b)
    result = simulate(mesh, SPEC, routes, prog.build(), mem, max_cycles=1000)
    expected = (a.astype(np.float16).astype(np.float32) + b.astype(np.float16)).astype(np.float16)
    np.testing.assert_array_equal(unpack_half(result.mem[1, 20:23], m), expected)


def test_traffic_over_several_colors_delivers_everything_and_relieves_blocking():
    """Packets spread over N colors (each with its own queues, like virtual channels): at
    low load with a drain every flit arrives; at saturation on 8x8 uniform XY traffic more
    colors accept more (a blocked packet no longer holds up the ones behind it)."""
    drained = TrafficConfig(width=6, height=5, rate=0.05, cycles=1500, warmup=100,
                            drain_cycles=500, colors=4, seed=3)  # fmt: skip
    r = run_traffic(drained, SPEC)
    assert r["colors"] == 4
    assert r["flits_in_flight"] == 0
    assert r["flits_injected"] == r["flits_ejected"] > 0
    accepted = [
        run_traffic(TrafficConfig(rate=0.5, cycles=2000, warmup=500, colors=c, seed=1),
                    SPEC)["accepted_rate"]
        for c in (1, 2, 4)
    ]  # fmt: skip
    assert accepted[0] < accepted[1] < accepted[2]
    with pytest.raises(ConfigError, match=r"colors=0 is out of range"):
        TrafficConfig(colors=0)
    with pytest.raises(ConfigError, match=r"colors=30 is out of range \[1, 24\]"):
        run_traffic(TrafficConfig(colors=30), SPEC)


def test_the_traffic_summary_reads_only_the_state_a_gpu_run_copies_back(monkeypatch):
    """run_traffic names the state arrays its summary reads (the GPU engine copies back those
    alone): with every other state array overwritten after the run, the summary is the
    same."""
    from wafersim.fabric import engine as fabric_engine
    from wafersim.fabric import traffic

    cfg = TrafficConfig(width=4, height=4, rate=0.5, cycles=300, warmup=50, seed=3)
    whole = run_traffic(cfg, SPEC)

    def runs_then_forgets(*args, keep=None):
        status = fabric_engine.run_chunks(*args, keep=keep)
        st = args[1]
        for name, value in st._asdict().items():
            if name not in keep and name != "link_any" and isinstance(value, np.ndarray):
                value[...] = 7  # what a copy back that skips it would leave: anything
        return status

    monkeypatch.setattr(traffic, "chunk_runner", lambda _engine: runs_then_forgets)
    forgot = run_traffic(cfg, SPEC)
    drop = ("sim_wall_s", "router_cycles_per_s")
    assert {k: v for k, v in forgot.items() if k not in drop} == {
        k: v for k, v in whole.items() if k not in drop
    }


def test_a_run_stopped_early_says_how_far_each_task_got():
    """``stop_at`` ends a run with work left (the first cycles of a long one): the result
    is not finished, its cycles are the stop, and ``ops_done`` counts each task's ops."""
    mesh, routes, prog = line(3)
    routes.add_path(0, [0, 1, 2])
    for _ in range(3):
        prog.send(0, 0, 0, 0, 20)
        prog.recv(2, 0, 0, 100, 20)
    mem = memory(3)
    whole = simulate(mesh, SPEC, routes, prog.build(), mem, max_cycles=1000)
    early = simulate(mesh, SPEC, routes, prog.build(), mem, max_cycles=1000, stop_at=45)
    assert whole.finished
    assert whole.ops_done[[0, 2], 0].tolist() == [3, 3]
    assert not early.finished
    assert early.cycles == 45
    assert early.ops_done[[0, 2], 0].tolist() == [2, 1]  # the receiver trails by the hops
    late = simulate(mesh, SPEC, routes, prog.build(), mem, max_cycles=1000, stop_at=999)
    assert late.finished
    assert late.cycles == whole.cycles
    with pytest.raises(ConfigError, match="stop_at=0 must be an integer >= 1"):
        simulate(mesh, SPEC, routes, prog.build(), mem, max_cycles=1000, stop_at=0)
    with pytest.raises(ConfigError, match="stop_at=2000 must be <= max_cycles=1000"):
        simulate(mesh, SPEC, routes, prog.build(), mem, max_cycles=1000, stop_at=2000)


def test_a_programs_queues_keep_no_wavelet_metadata():
    """Every wavelet of a program's color carries the same metadata, so a program's run keeps
    one unused slot of it a queue (a third of the queues' memory), and still moves the words."""
    from wafersim.fabric.engine import program_state

    mesh = Mesh.full(3, 1)
    routes = ColorRoutes(mesh, 2)
    routes.add_path(1, [0, 1, 2])
    builder = ProgramBuilder(mesh.pes, preset("tiny").pe, 2)
    builder.send(0, 0, 1, 0, 16)
    builder.recv(2, 0, 1, 32, 16)
    program = builder.build()
    _, st = program_state(mesh, preset("tiny"), routes.table, program, 64)
    assert st.q_meta.shape == (3, 5, 2, 1)
    assert st.rx_meta.shape == (3, 2, 1)
    assert st.q_data.shape[-1] == 4
    assert st.rx_data.shape[-1] == 6
    memory = np.zeros((3, 64), np.float32)
    memory[0, :16] = np.arange(1, 17)
    result = simulate(mesh, preset("tiny"), routes, program, memory, max_cycles=1000)
    np.testing.assert_array_equal(result.mem[2, 32:48], np.arange(1, 17))


def test_traffic_takes_router_queues_deeper_than_a_byte():
    """The spec allows router queues up to 1,024 wavelets; traffic's sinks and sources are
    that deep too (their depths are not held in a byte)."""
    config = TrafficConfig(width=3, height=3, rate=0.5, cycles=300, warmup=50, queue_depth=300,
                           colors=2)  # fmt: skip
    summary = run_traffic(config, preset("tiny"))
    assert summary["flits_injected"] > 0
