"""MemoryX weight streaming: hand-computed tile timings, the kernel against the slow reference
in tests/reference_stream.py, summaries, the no-stall closed form, validation and segments."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_stream import COLUMNS, reference_stream
from wafersim.compiler.model_file import load_model
from wafersim.compiler.plan import CompileOptions, compile_plan
from wafersim.memoryx import _stream_jit as K
from wafersim.memoryx.streaming import (
    Edge,
    Segment,
    kept_on_wafer,
    no_stall_threshold,
    segments,
    simulate_stream,
    weight_bytes,
)
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset

ZOO = Path(__file__).resolve().parents[1] / "examples" / "models"
KERNEL_COLUMN = {name: getattr(K, name.upper()) for name in COLUMNS}
BIG = 10**9  # a prefetch buffer that never fills in these cases


def seg(in_bytes=0, out_bytes=0, compute=0, owner=0, name="l", gemm=True) -> Segment:
    return Segment(name, "forward", in_bytes, out_bytes, compute, owner, gemm)


def column(result, name: str) -> np.ndarray:
    """``times[:, :, name]`` of a StreamResult."""
    return result.times[:, :, KERNEL_COLUMN[name]]


def as_kernel_order(reference) -> np.ndarray:
    """The reference's rows (COLUMNS order) in the kernel's column order."""
    ref = np.asarray(reference, np.float64)
    out = np.zeros_like(ref)
    for i, name in enumerate(COLUMNS):
        out[..., KERNEL_COLUMN[name]] = ref[..., i]
    return out


# --- hand-computed tables -------------------------------------------------------------------

# in_bytes, bytes_per_cycle, latency | stall = in/bw + latency, compute_end = stall + compute
ONE_TILE = [
    # in    bw   lat  compute | stall  compute_end
    (1000, 10.0, 5, 50, 105, 155),
    (1000, 100.0, 0, 1, 10, 11),
    (64, 8.0, 3, 0, 11, 11),
    (4096, 0.5, 100, 7, 8292, 8299),
]


@pytest.mark.parametrize(("in_bytes", "bw", "lat", "compute", "stall", "end"), ONE_TILE)
def test_one_segment_one_tile_stalls_for_its_stream(in_bytes, bw, lat, compute, stall, end):
    """One segment of one tile: compute waits bytes / bandwidth + latency, then runs."""
    result = simulate_stream([seg(in_bytes, compute=compute)], Edge(bw, lat, in_bytes, in_bytes), 1)
    assert column(result, "in_start")[0, 0] == 0
    assert column(result, "in_end")[0, 0] == stall
    assert column(result, "stall")[0, 0] == stall
    assert column(result, "compute_start")[0, 0] == stall
    assert column(result, "compute_end")[0, 0] == end
    assert result.total_cycles == end


# two segments of 100 bytes in one tile each, bw 1 byte/cycle, no latency, big buffer
TWO_SEGMENTS = {
    # compute: [(in_start, in_end, compute_start, compute_end, stall) for segment 0, 1]
    200: [(0, 100, 100, 300, 100), (100, 200, 300, 500, 0)],  # compute-bound: hidden
    100: [(0, 100, 100, 200, 100), (100, 200, 200, 300, 0)],  # balanced: just hidden
    50: [(0, 100, 100, 150, 100), (100, 200, 200, 250, 50)],  # edge-bound: stalls 50
}


@pytest.mark.parametrize("compute", sorted(TWO_SEGMENTS))
def test_compute_bound_segment_hides_the_next_stream(compute):
    """The next segment's weights prefetch while this one computes: no stall if it is longer."""
    segs = [seg(100, compute=compute, owner=0), seg(100, compute=compute, owner=1)]
    result = simulate_stream(segs, Edge(1.0, 0, BIG, 100), 1)
    names = ("in_start", "in_end", "compute_start", "compute_end", "stall")
    got = [tuple(column(result, name)[0, j] for name in names) for j in range(2)]
    assert got == TWO_SEGMENTS[compute]


# one segment of 100 bytes and 100 compute cycles, bw 1, no latency: only the first tile stalls
TILING = [
    # tile_bytes  tiles | stall  compute_end
    (100, 1, 100, 200),
    (50, 2, 50, 150),
    (25, 4, 25, 125),
    (10, 10, 10, 110),
]


@pytest.mark.parametrize(("tile_bytes", "tiles", "stall", "end"), TILING)
def test_tiles_pipeline_the_stream_with_compute(tile_bytes, tiles, stall, end):
    """A tile computes once it arrived: smaller tiles leave only the first tile's stall."""
    assert math.ceil(100 / tile_bytes) == tiles
    result = simulate_stream([seg(100, compute=100)], Edge(1.0, 0, BIG, tile_bytes), 1)
    assert column(result, "stall")[0, 0] == pytest.approx(stall)
    assert column(result, "compute_end")[0, 0] == pytest.approx(end)


# segments [(in_bytes, compute)], tile 100, bw 1, no latency; the row is the LAST segment's
BUFFER = [
    # segments                 buffer | in_start  buffer_wait  stall  total
    ([(100, 200), (100, 200)], 100, 300, 200, 100, 600),  # waits for segment 0's compute end
    ([(100, 200), (100, 200)], 150, 300, 200, 100, 600),  # 150 bytes cannot hold two tiles
    ([(100, 200), (100, 200)], 200, 100, 0, 0, 500),  # room for both: prefetched
    ([(300, 600)], 200, 0, 100, 100, 700),  # tile 2 waits for tile 0, compute still bound
    ([(300, 600)], 300, 0, 0, 100, 700),
]


@pytest.mark.parametrize(("segs", "buffer", "in_start", "wait", "stall", "total"), BUFFER)
def test_small_buffer_makes_the_stream_wait(segs, buffer, in_start, wait, stall, total):
    """A tile streams only when the prefetch buffer has room; space frees at compute end."""
    segs = [seg(b, compute=c, owner=j) for j, (b, c) in enumerate(segs)]
    result = simulate_stream(segs, Edge(1.0, 0, buffer, 100), 1)
    assert column(result, "in_start")[0, -1] == in_start
    assert column(result, "buffer_wait")[0, -1] == wait
    assert column(result, "stall")[0, -1] == stall
    assert result.total_cycles == total


# forward (100 bytes in, 10 cycles, owner 0) then backward_weight (100 bytes out, 10 cycles,
# owner `grad_owner`); bw 1, latency 5, big buffer, two steps
UPDATE = {
    # grad_owner: rows (step, segment) of
    #   in_start in_end compute_start compute_end stall buffer_wait update_wait out_end
    0: [
        [(0, 105, 105, 115, 105, 0, 0, 0), (-1, 0, 115, 125, 0, 0, 0, 230)],
        [(230, 335, 335, 345, 210, 0, 130, 0), (-1, 0, 345, 355, 0, 0, 0, 460)],
    ],
    1: [  # another layer's gradients: step 2's weights stream at once
        [(0, 105, 105, 115, 105, 0, 0, 0), (-1, 0, 115, 125, 0, 0, 0, 230)],
        [(100, 205, 205, 215, 80, 0, 0, 0), (-1, 0, 215, 225, 0, 0, 0, 330)],
    ],
}


@pytest.mark.parametrize("grad_owner", sorted(UPDATE))
def test_next_step_weights_wait_for_their_gradients(grad_owner):
    """Step s+1's weights of a layer stream after its step-s gradients reached MemoryX."""
    segs = [seg(100, compute=10, owner=0), seg(out_bytes=100, compute=10, owner=grad_owner)]
    result = simulate_stream(segs, Edge(1.0, 5, BIG, 100), 2)
    got = [[tuple(column(result, n)[s, j] for n in COLUMNS) for j in range(2)] for s in range(2)]
    assert got == UPDATE[grad_owner]


# one segment: 100 bytes out in two 50-byte tiles, 100 compute cycles (50 per tile)
GRADIENTS = [
    # bw   latency | out_end   (tile i leaves after its compute and after tile i-1)
    (1.0, 0, 150.0),  # 50..100, 100..150
    (0.5, 0, 250.0),  # 50..150, 150..250: the link is the bound
    (4.0, 0, 112.5),  # 50..62.5, 100..112.5: compute is the bound
    (1.0, 10, 160.0),
]


@pytest.mark.parametrize(("bw", "lat", "out_end"), GRADIENTS)
def test_gradients_stream_out_tile_by_tile(bw, lat, out_end):
    """A gradient tile leaves when its compute ended and the outbound link is free."""
    result = simulate_stream([seg(out_bytes=100, compute=100)], Edge(bw, lat, BIG, 50), 1)
    assert column(result, "out_end")[0, 0] == out_end
    assert column(result, "stall")[0, 0] == 0
    assert result.total_cycles == math.ceil(out_end)


def test_links_are_full_duplex():
    """Weights stream in while gradients stream out: neither waits for the other."""
    segs = [seg(out_bytes=100, compute=10, owner=0), seg(100, compute=10, owner=1)]
    result = simulate_stream(segs, Edge(1.0, 0, BIG, 100), 1)
    assert column(result, "out_end")[0, 0] == 110  # 10..110 out
    assert column(result, "in_start")[0, 1] == 0  # 0..100 in, at the same time
    assert column(result, "compute_start")[0, 1] == 100


def test_a_tile_that_fits_exactly_does_not_wait():
    """Bytes held + the tile == buffer fits: the tile waits only for the space it needs."""
    # segment 0: 1 byte (stream 0..1, compute 1..12); segment 1: 5 bytes in 3 tiles of 5/3,
    # buffer 5. Tile 2 needs segment 0's byte freed (t = 12), then 5/3 * 3 = 5 fit exactly:
    # it streams 12..13.67 and segment 1 computes 12..15 without a stall.
    segs = [seg(1, compute=11, owner=0), seg(5, compute=3, owner=1)]
    result = simulate_stream(segs, Edge(1.0, 0, 5, 2), 1)
    assert column(result, "in_end")[0, 1] == pytest.approx(12 + 5 / 3)
    assert column(result, "stall")[0, 1] == 0
    assert column(result, "compute_end")[0, 1] == 15


# --- the kernel against the reference -------------------------------------------------------


@st.composite
def stream_cases(draw):
    """Random segments of any byte counts (tiles of fractional bytes too), up to 4 tiles each,
    at byte scales from single bytes to MiB-sized tiles."""
    tile = draw(st.integers(1, 64)) * draw(st.sampled_from([1, 4099, 2**16]))
    edge = Edge(
        draw(st.floats(0.125, 16.0)) * tile / 64,
        draw(st.integers(0, 40)),
        tile * draw(st.integers(1, 4)) + draw(st.integers(0, tile - 1)),
        tile,
    )
    segs = []
    for j in range(draw(st.integers(1, 6))):
        in_bytes = draw(st.integers(0, 4 * tile)) * (draw(st.integers(0, 7)) > 0)
        out_bytes = draw(st.integers(0, 4 * tile)) * draw(st.booleans())
        compute = draw(st.integers(0, 400))
        owner = draw(st.integers(-1, 3))
        segs.append(seg(in_bytes, out_bytes, compute, owner, f"l{j}"))
    return segs, edge, draw(st.integers(1, 3))


@settings(max_examples=60, deadline=None)
@given(stream_cases())
def test_kernel_matches_reference(case):
    """The Numba kernel's event times equal the pure-Python reference, every column."""
    segs, edge, steps = case
    got = simulate_stream(segs, edge, steps).times
    expected = as_kernel_order(reference_stream(segs, edge, steps))
    assert got.shape == (steps, len(segs), K.COLUMNS)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-6)


def test_reference_reproduces_the_hand_table():
    """The reference itself agrees with the hand-computed update table."""
    segs = [seg(100, compute=10, owner=0), seg(out_bytes=100, compute=10, owner=0)]
    ref = reference_stream(segs, Edge(1.0, 5, BIG, 100), 2)
    assert [[tuple(row) for row in step] for step in ref] == UPDATE[0]


# --- summary and per-layer totals -----------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(stream_cases())
def test_summary_totals_are_consistent(case):
    """Summary: stall fraction and edge use in [0, 1], bytes and compute are sums x steps."""
    segs, edge, steps = case
    result = simulate_stream(segs, edge, steps)
    summary, layers = result.summary(), result.per_layer()
    total = summary["total_cycles"]
    assert 0.0 <= summary["stall_fraction"] <= 1.0
    assert 0.0 <= summary["edge_utilization"] <= 1.0
    assert summary["memoryx_bytes_in"] == steps * sum(s.in_bytes for s in segs)
    assert summary["memoryx_bytes_out"] == steps * sum(s.out_bytes for s in segs)
    assert summary["compute_cycles"] == steps * sum(s.compute_cycles for s in segs)
    assert total >= summary["compute_cycles"] + summary["stall_cycles"] - 1  # stall rounded
    assert total >= math.ceil(sum(s.in_bytes for s in segs) * steps / edge.bytes_per_cycle)
    assert sum(row["in_bytes"] for row in layers) == summary["memoryx_bytes_in"]
    assert sum(row["out_bytes"] for row in layers) == summary["memoryx_bytes_out"]
    assert sum(row["compute_cycles"] for row in layers) == summary["compute_cycles"]
    assert abs(sum(row["stall_cycles"] for row in layers) - summary["stall_cycles"]) <= len(segs)
    assert [(row["layer"], row["pass"]) for row in layers] == [(s.layer, s.pass_name) for s in segs]


def test_summary_of_a_hand_case():
    """Summary of the update table (owner 0): the numbers read off the table."""
    segs = [seg(100, compute=10, owner=0), seg(out_bytes=100, compute=10, owner=0)]
    summary = simulate_stream(segs, Edge(1.0, 5, BIG, 100), 2).summary()
    assert summary == {
        "total_cycles": 460,
        "compute_cycles": 40,
        "stall_cycles": 105 + 210,
        "stall_fraction": 315 / 460,
        "buffer_wait_cycles": 0,
        "update_wait_cycles": 130,  # step 2's weights wait 230 - 100 for the optimizer
        "memoryx_bytes_in": 200,
        "memoryx_bytes_out": 200,
        "edge_utilization": 400 / (2 * 460),
    }


# --- the no-stall closed form ---------------------------------------------------------------

# four matmuls of 1000 weight bytes, 100-byte tiles, bw 1, latency 10: the stream of one
# segment takes 1000 cycles, so the closed form's ratio is 1000 / compute
SWEEP_RATIOS = (2.0, 1.5, 1.25, 1.1, 1.05, 1.0, 0.95, 0.8, 0.5, 0.25, 0.1)
SWEEP_EDGE = Edge(1.0, 10, BIG, 100)
FILL = 100 + 10  # the first tile's stream and latency: no compute can hide it


def test_stall_falls_to_zero_where_the_closed_form_crosses_one():
    """Stall fraction is non-increasing in compute; it is the fill alone from ratio 1 down."""
    fractions, excess = [], []
    for ratio in SWEEP_RATIOS:
        segs = [seg(1000, compute=round(1000 / ratio), owner=j) for j in range(4)]
        assert no_stall_threshold(segs, SWEEP_EDGE) == pytest.approx(ratio, rel=1e-3)
        summary = simulate_stream(segs, SWEEP_EDGE, 1).summary()
        fractions.append(summary["stall_fraction"])
        excess.append(summary["stall_cycles"] - FILL)
    assert all(a >= b for a, b in zip(fractions, fractions[1:], strict=False))
    for ratio, extra in zip(SWEEP_RATIOS, excess, strict=True):
        assert (extra <= 100) == (ratio <= 1.0), (ratio, extra)  # within one tile's stream
    assert fractions[-1] < 0.01


@st.composite
def gemm_chains(draw):
    tile = draw(st.integers(1, 500))
    segs = [
        seg(draw(st.integers(0, 3000)), compute=draw(st.integers(1, 3000)), owner=j)
        for j in range(draw(st.integers(1, 6)))
    ]
    return segs, Edge(draw(st.floats(0.25, 8.0)), draw(st.integers(0, 50)), BIG, tile)


@settings(max_examples=40, deadline=None)
@given(gemm_chains())
def test_closed_form_below_one_means_no_stall_beyond_one_tile(case):
    """Threshold <= 1 (big buffer, one step): stall <= latency + one tile's stream time."""
    segs, edge = case
    threshold = no_stall_threshold(segs, edge)
    scale = max(1.0, threshold)  # slow compute down until the closed form says no stall
    segs = [
        seg(s.in_bytes, compute=math.ceil(s.compute_cycles * scale), owner=s.owner) for s in segs
    ]
    assert no_stall_threshold(segs, edge) <= 1.0
    stall = simulate_stream(segs, edge, 1).times[0, :, K.STALL].sum()
    assert stall <= edge.latency_cycles + edge.tile_bytes / edge.bytes_per_cycle + 1e-6


def test_closed_form_leaves_out_vector_work():
    """no_stall_threshold counts matmuls that stream weights, and is 0 without any."""
    edge = Edge(1.0, 0, BIG, 100)
    segs = [seg(100, compute=50), seg(1000, compute=1, gemm=False), seg(0, compute=0)]
    assert no_stall_threshold(segs, edge) == 2.0
    assert no_stall_threshold(segs[1:], edge) == 0.0


# --- validation -----------------------------------------------------------------------------

BAD_EDGES = [
    # field, Edge(bytes_per_cycle, latency_cycles, buffer_bytes, tile_bytes)
    ("bytes_per_cycle", (0, 0, 100, 10)),
    ("bytes_per_cycle", (-1.0, 0, 100, 10)),
    ("bytes_per_cycle", ("1", 0, 100, 10)),
    ("bytes_per_cycle", (True, 0, 100, 10)),
    ("latency_cycles", (1.0, -1, 100, 10)),
    ("latency_cycles", (1.0, None, 100, 10)),
    ("buffer_bytes", (1.0, 0, 0, 10)),
    ("tile_bytes", (1.0, 0, 100, 0)),
    ("tile_bytes", (1.0, 0, 100, 101)),  # a tile larger than the buffer
]


@pytest.mark.parametrize(("field", "args"), BAD_EDGES)
def test_edge_rejects_bad_values(field, args):
    """A bad Edge value is a ConfigError naming the field."""
    with pytest.raises(ConfigError, match=f"memoryx.{field}="):
        Edge(*args)


def test_edge_rejects_nan_bandwidth():
    """bytes_per_cycle=NaN is a ConfigError, not NaN event times."""
    with pytest.raises(ConfigError, match="bytes_per_cycle"):
        Edge(float("nan"), 0, 100, 10)


@pytest.mark.parametrize("steps", [0, -1, 1.5, True, "2"])
def test_simulate_rejects_bad_steps(steps):
    """steps must be an integer >= 1."""
    with pytest.raises(ConfigError, match="steps="):
        simulate_stream([seg(10, compute=1)], Edge(1.0, 0, 100, 10), steps)


def test_simulate_rejects_no_segments():
    """A plan without segments has nothing to stream."""
    with pytest.raises(ConfigError, match="no layers"):
        simulate_stream([], Edge(1.0, 0, 100, 10), 1)


# --- segments of a compiled plan ------------------------------------------------------------

# fc-digits (64-256-128-10, fp32): weights 4 bytes each, biases too
FC_DIGITS = [
    # layer       pass               in_bytes     out_bytes    owner  gemm
    ("fc1", "forward", 64 * 256 * 4, 0, 0, True),
    ("fc1.bias", "forward", 256 * 4, 0, 1, False),
    ("relu1", "forward", 0, 0, -1, False),
    ("fc2", "forward", 256 * 128 * 4, 0, 3, True),
    ("fc2.bias", "forward", 128 * 4, 0, 4, False),
    ("relu2", "forward", 0, 0, -1, False),
    ("fc3", "forward", 128 * 10 * 4, 0, 6, True),
    ("fc3.bias", "forward", 10 * 4, 0, 7, False),
    ("loss", "forward", 0, 0, -1, False),
    ("loss", "backward_data", 0, 0, -1, False),
    ("fc3.bias", "backward_data", 0, 0, -1, False),  # a bias add's dX needs no bias
    ("fc3.bias", "backward_weight", 0, 10 * 4, 7, False),
    ("fc3", "backward_data", 128 * 10 * 4, 0, 6, True),
    ("fc3", "backward_weight", 0, 128 * 10 * 4, 6, True),
    ("relu2", "backward_data", 0, 0, -1, False),
    ("fc2.bias", "backward_data", 0, 0, -1, False),
    ("fc2.bias", "backward_weight", 0, 128 * 4, 4, False),
    ("fc2", "backward_data", 256 * 128 * 4, 0, 3, True),
    ("fc2", "backward_weight", 0, 256 * 128 * 4, 3, True),
    ("relu1", "backward_data", 0, 0, -1, False),
    ("fc1.bias", "backward_data", 0, 0, -1, False),
    ("fc1.bias", "backward_weight", 0, 256 * 4, 1, False),
    ("fc1", "backward_weight", 0, 64 * 256 * 4, 0, True),  # no backward_data: the input
]


@pytest.fixture(scope="module")
def fc_digits_plan():
    model = load_model(ZOO / "fc-digits.yaml")
    return compile_plan(model, preset("tiny"), CompileOptions(batch=8, dtype="fp32"))


def test_segments_order_and_bytes(fc_digits_plan):
    """Forward in layer order, then per layer reversed backward_data, backward_weight."""
    segs = segments(fc_digits_plan)
    got = [(s.layer, s.pass_name, s.in_bytes, s.out_bytes, s.owner, s.gemm) for s in segs]
    assert got == FC_DIGITS
    layers = {lay.name: lay.passes for lay in fc_digits_plan.layers}
    for s in segs:
        assert s.compute_cycles == layers[s.layer][s.pass_name].kernel_cycles


def test_measured_cycles_override_the_plan(fc_digits_plan):
    """compute[(layer, pass)] replaces that segment's analytic kernel_cycles, only that one."""
    plain = segments(fc_digits_plan)
    measured = segments(fc_digits_plan, {("fc2", "forward"): 12345, ("fc1", "backward_weight"): 7})
    changed = {
        (a.layer, a.pass_name): b.compute_cycles
        for a, b in zip(plain, measured, strict=True)
        if a != b
    }
    assert changed == {("fc2", "forward"): 12345, ("fc1", "backward_weight"): 7}


def test_plan_streams_end_to_end(fc_digits_plan, tiny):
    """A compiled plan streams: the kernel equals the reference on its segments, two steps."""
    segs = segments(fc_digits_plan)
    edge = Edge(tiny.edge_bytes_per_cycle, 20, 64 * 1024, 16 * 1024)
    got = simulate_stream(segs, edge, 2).times
    np.testing.assert_allclose(got, as_kernel_order(reference_stream(segs, edge, 2)), rtol=1e-9)


def test_the_last_layer_keeps_its_weights_for_its_backward(fc_digits_plan):
    """The output layer's weights (and its bias) stay on the wafer from their
    forward to their backward where they fit half the prefetch buffer; their backward_data
    then streams nothing in, and every other segment is as before."""
    output = frozenset({"fc3", "fc3.bias"})
    need = weight_bytes(fc_digits_plan, output)
    assert kept_on_wafer(fc_digits_plan, 2 * need) == output
    assert kept_on_wafer(fc_digits_plan, 2 * need - 1) == frozenset()
    plain, kept = segments(fc_digits_plan), segments(fc_digits_plan, kept=output)
    changed = [(a.layer, a.pass_name, b.in_bytes)
               for a, b in zip(plain, kept, strict=True) if a != b]  # fmt: skip
    assert changed == [("fc3", "backward_data", 0)]  # a bias needs no weights there
