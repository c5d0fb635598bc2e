"""SwarmX: tree shape, broadcast/reduce timing, the functional reduction and scaling."""

import math

import numpy as np
import pytest
from wafersim.memoryx.swarmx import (
    PACKET_BYTES,
    broadcast_cycles,
    effective_edge,
    reduce_cycles,
    reduce_gradients,
    scaling,
    tree_levels,
)
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset

SPEC = preset("tiny")
SHAPES = {"w": (7, 5), "b": (5,), "s": ()}


def _per_wafer(wafers: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        {name: rng.standard_normal(shape).astype(np.float32) for name, shape in SHAPES.items()}
        for _ in range(wafers)
    ]


def _ref_tree_sum(leaves: list[np.ndarray], fanout: int) -> np.ndarray:
    """Slow reference: the same tree order, one node at a time, in float32."""
    while len(leaves) > 1:
        parents = []
        for k in range(0, len(leaves), fanout):
            node = np.float32(0) + leaves[k]
            for child in leaves[k + 1 : k + fanout]:
                node = (node + child).astype(np.float32)
            parents.append(node)
        leaves = parents
    return leaves[0]


# (wafers, fanout, levels): ceil(log_fanout(wafers)), 0 for one wafer.
LEVELS = [
    (1, 2, 0),
    (2, 2, 1),
    (3, 2, 2),
    (4, 2, 2),
    (5, 2, 3),
    (1, 4, 0),
    (4, 4, 1),
    (5, 4, 2),
    (16, 4, 2),
    (17, 4, 3),
    (192, 4, 4),
    (192, 6, 3),
    (4096, 64, 2),
    (4096, 2, 12),
]


@pytest.mark.parametrize(("wafers", "fanout", "levels"), LEVELS)
def test_levels_grow_with_log_of_wafers(wafers, fanout, levels):
    """The tree has ceil(log_fanout(wafers)) levels, none for a single wafer."""
    assert tree_levels(wafers, fanout) == levels


def test_cs2_io_has_swarmx_knobs():
    """CS-2 I/O: one 1.2 Tb/s SwarmX link per wafer [HC33]; fan-out 4, ~1 us a level (assumed)."""
    io = SPEC.io
    assert (io.swarmx_fanout, io.swarmx_link_bits_per_s, io.swarmx_level_latency_cycles) == (
        4,
        1.2e12,
        850,
    )


@pytest.mark.parametrize("n_bytes", [0, 1, 1000, PACKET_BYTES, 123_457, 10**9])
def test_one_wafer_equals_plain_edge_streaming(n_bytes):
    """With one wafer, broadcast and reduce are plain edge streaming: ceil(n / edge) + latency."""
    plain = math.ceil(n_bytes / SPEC.edge_bytes_per_cycle) + SPEC.io.edge_latency_cycles
    assert broadcast_cycles(n_bytes, 1, SPEC) == plain
    assert reduce_cycles(n_bytes, 1, SPEC) == plain
    assert effective_edge(SPEC, 1) == (SPEC.edge_bytes_per_cycle, SPEC.io.edge_latency_cycles)


def test_each_level_adds_latency_and_one_packet():
    """16 wafers at fan-out 4 = 2 levels, each adding 850 cycles + ceil(1500 B / 176.5 B) = 9."""
    n_bytes = 10**6
    one = broadcast_cycles(n_bytes, 1, SPEC)
    assert broadcast_cycles(n_bytes, 16, SPEC) == one + 2 * (850 + 9)
    assert reduce_cycles(n_bytes, 16, SPEC) == one + 2 * (850 + 9)
    assert effective_edge(SPEC, 16) == (SPEC.edge_bytes_per_cycle, 1000 + 2 * (850 + 9))


def test_slow_swarmx_link_limits_the_stream():
    """A SwarmX link slower than the wafer edge sets the stream rate."""
    slow = SPEC.replace({"io.swarmx_link_bits_per_s": 0.6e12})
    link = 0.6e12 / 8 / SPEC.clock_hz
    rate, latency = effective_edge(slow, 2)
    assert rate == pytest.approx(link)
    assert latency == 1000 + 850 + math.ceil(PACKET_BYTES / link)
    assert broadcast_cycles(10**6, 2, slow) == math.ceil(10**6 / link) + latency


def test_broadcast_never_gets_faster_with_more_wafers():
    """Cycles are non-decreasing in the number of wafers."""
    cycles = [broadcast_cycles(10**7, w, SPEC) for w in range(1, 200)]
    assert cycles == sorted(cycles)


@pytest.mark.parametrize("wafers", [1, 2, 3, 5, 7, 16, 17])
@pytest.mark.parametrize("fanout", [2, 3, 4, 5])
def test_reduce_equals_numpy_sum(wafers, fanout):
    """The tree reduction equals the numpy sum of all wafers' gradients, within float error."""
    per_wafer = _per_wafer(wafers, seed=wafers * 10 + fanout)
    total = reduce_gradients(per_wafer, fanout)
    assert list(total) == list(SHAPES)
    for name, shape in SHAPES.items():
        expected = np.sum([g[name].astype(np.float64) for g in per_wafer], axis=0)
        assert total[name].dtype == np.float32
        assert total[name].shape == shape
        np.testing.assert_allclose(total[name], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("wafers", "fanout"), [(7, 2), (10, 3), (17, 4)])
def test_reduce_follows_tree_order_bit_for_bit(wafers, fanout):
    """The sum is the tree's float32 order exactly, and the same on every call."""
    per_wafer = _per_wafer(wafers, seed=3)
    first = reduce_gradients(per_wafer, fanout)
    again = reduce_gradients(per_wafer, fanout)
    for name in SHAPES:
        ref = _ref_tree_sum([g[name] for g in per_wafer], fanout)
        np.testing.assert_array_equal(first[name], ref)
        np.testing.assert_array_equal(again[name], first[name])


def test_reduce_leaves_inputs_untouched():
    """Reducing does not write into the wafers' gradient arrays."""
    per_wafer = _per_wafer(5)
    before = [{n: a.copy() for n, a in g.items()} for g in per_wafer]
    reduce_gradients(per_wafer, 2)
    for grads, saved in zip(per_wafer, before, strict=True):
        for name in SHAPES:
            np.testing.assert_array_equal(grads[name], saved[name])


def test_identical_wafers_scale_linearly():
    """N identical compute-bound wafers give speedup N and efficiency 1."""
    result = scaling([10**7] * 8, 10**6, 10**6, SPEC)
    assert result["wafers"] == 8
    assert result["step_cycles"] == 10**7
    assert result["speedup"] == pytest.approx(8.0)
    assert result["efficiency"] == pytest.approx(1.0)


def test_slow_wafer_sets_the_pace():
    """The wafer with the most step cycles (worst defect map) sets every wafer's step."""
    result = scaling([1000_000, 1000_000, 1250_000, 1000_000], 10**4, 10**4, SPEC)
    assert result["slowest_wafer"] == 2
    assert result["step_cycles"] == 1250_000
    assert result["speedup"] == pytest.approx(4 * 1000_000 / 1250_000)
    assert result["efficiency"] == pytest.approx(0.8)


def test_streaming_bound_when_links_are_slow():
    """With a slow SwarmX link the step waits for the broadcast, not for compute."""
    slow = SPEC.replace({"io.swarmx_link_bits_per_s": 1e9})
    result = scaling([1000] * 4, 10**6, 10, slow)
    assert result["step_cycles"] == broadcast_cycles(10**6, 4, slow)
    assert result["step_cycles"] == result["broadcast_cycles"] > result["reduce_cycles"]
    assert result["efficiency"] < 1.0


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: tree_levels(0, 4), "wafers"),
        (lambda: tree_levels(4097, 4), "wafers"),
        (lambda: tree_levels(4, 1), "fanout"),
        (lambda: tree_levels(4, 65), "fanout"),
        (lambda: tree_levels(2.0, 4), "wafers"),
        (lambda: broadcast_cycles(-1, 2, SPEC), "n_bytes"),
        (lambda: reduce_cycles(10, 0, SPEC), "wafers"),
        (lambda: effective_edge(SPEC, 5000), "wafers"),
        (lambda: reduce_gradients([], 2), "per_wafer"),
        (lambda: reduce_gradients(_per_wafer(2), 1), "fanout"),
        (lambda: reduce_gradients([{"w": np.zeros(3)}, {"v": np.zeros(3)}], 2), r"per_wafer\[1\]"),
        (lambda: reduce_gradients([{"w": np.zeros(3)}, {"w": np.zeros(4)}], 2), "shape"),
        (lambda: reduce_gradients([{"w": np.zeros(3, dtype=int)}], 2), "dtype"),
        (lambda: scaling([], 1, 1, SPEC), "step_cycles_per_wafer"),
        (lambda: scaling([10, 0], 1, 1, SPEC), r"step_cycles_per_wafer\[1\]"),
        (lambda: scaling([10], -1, 1, SPEC), "stream_bytes_per_step"),
        (lambda: scaling([10], 1, 1.5, SPEC), "grad_bytes_per_step"),
    ],
)
def test_bad_inputs_name_the_field(call, field):
    """Bad counts, sizes and mismatched gradients raise ConfigError naming the field."""
    with pytest.raises(ConfigError, match=field):
        call()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("io.swarmx_fanout", 1),
        ("io.swarmx_fanout", 65),
        ("io.swarmx_link_bits_per_s", 0.5),
        ("io.swarmx_level_latency_cycles", -1),
    ],
)
def test_swarmx_knobs_are_range_checked(key, value):
    """Out-of-range SwarmX knobs are rejected with the knob's name."""
    with pytest.raises(ConfigError, match=key.split(".")[1]):
        SPEC.replace({key: value})
