"""Stall reasons: the engine counts each working PE's every cycle once, as computing, waiting
for an input wavelet, waiting for room to send, waiting on SRAM (not modelled) or idle, on
every kernel algorithm and on synthetic traffic."""

from __future__ import annotations

import numpy as np
import pytest
from wafersim.fabric.engine import REASON_NAMES
from wafersim.fabric.traffic import TrafficConfig, run_traffic
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.registry import KERNELS, run_kernel, shape_of

CASES = [(kernel, algo) for kernel, algos in KERNELS.items() for algo in algos]


@pytest.mark.parametrize(("kernel", "algo"), CASES)
def test_every_pe_cycle_is_counted_once(kernel, algo, tiny):
    """Each PE's reasons sum to the cycles of the run (cycles 0 to ``cycles - 1``, the
    last event's), and the busy PEs computed."""
    grid = kernel_grid(4, 4)
    shape = {"n": 4} if kernel == "fft" else shape_of(kernel, 16, 16, 16)  # n x n PEs
    result = run_kernel(kernel, algo, shape, grid, tiny, seed=1)
    reasons = result.pe_cycle_reasons
    assert reasons.shape == (4, 4, len(REASON_NAMES))
    np.testing.assert_array_equal(reasons.sum(axis=-1), result.cycles)
    assert reasons[..., REASON_NAMES.index("waiting_sram")].sum() == 0  # not modelled
    assert (reasons[..., 0] > 0).any()
    summary = result.summary()["pe_cycles_by_reason"]
    assert sum(summary.values()) == 16 * result.cycles


def test_traffic_cycles_by_reason_cover_every_working_pe(tiny):
    """Sources inject (computing) or find their queue full (waiting for output) or idle:
    all working PEs' cycles; near saturation most of a source's cycles wait for output."""
    summary = run_traffic(TrafficConfig(8, 8, rate=0.9, cycles=400, warmup=100, seed=2), tiny)
    reasons = summary["pe_cycles_by_reason"]
    assert sum(reasons.values()) == 64 * 400
    assert reasons["computing"] == summary["flits_injected"]
    assert reasons["waiting_output"] > reasons["computing"]
    assert reasons["waiting_input"] == reasons["waiting_sram"] == 0


def test_a_gemv_waits_less_for_input_with_x_resident(tiny):
    """x already in the PEs: less waiting for input wavelets than x streamed from the edge."""
    waits = {}
    for inputs in ("streamed", "resident"):
        result = run_kernel("gemv", "chain", {"m": 64, "n": 64}, kernel_grid(8, 8), tiny,
                            inputs=inputs)  # fmt: skip
        waits[inputs] = result.summary()["pe_cycles_by_reason"]["waiting_input"]
    assert waits["resident"] < waits["streamed"]
