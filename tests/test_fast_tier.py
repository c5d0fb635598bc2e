"""The fast tier: GEMM cycles from small engine runs, against the cycle engine itself."""

from __future__ import annotations

import pytest
from wafersim.kernels.fast_tier import fast_cycles
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.registry import run_kernel
from wafersim.wafer.errors import ConfigError


@pytest.mark.parametrize(
    ("algo", "shape"),
    [
        ("weight_stream", {"m": 64, "k": 64, "n": 128}),
        ("systolic", {"m": 64, "k": 96, "n": 64}),
        ("summa", {"m": 64, "k": 64, "n": 64}),
        ("cannon_interleaved", {"m": 64, "k": 64, "n": 64}),
    ],
)
def test_fast_tier_is_within_ten_percent_of_the_engine(algo, shape, tiny):
    """Estimated from 4x4 runs, an 8x8 kernel's cycles are within 10 % of the engine's."""
    engine = run_kernel("gemm", algo, shape, kernel_grid(8, 8), tiny, "fp32").cycles
    fast = fast_cycles(algo, shape, 8, 8, tiny, "fp32", reduced_side=4)
    assert [r["rows_cols"][0] for r in fast.reduced] <= [4, 4]
    assert fast.cycles == pytest.approx(engine, rel=0.10)


def test_fast_tier_sees_holes(tiny):
    """Dead PEs in the reduced runs cost detours the analytic model does not know (a fifth
    of them: with fewer, the longer reductions hide behind the multiplies they share the
    datapath with)."""
    shape = {"m": 64, "k": 64, "n": 128}
    clean = fast_cycles("weight_stream", shape, 8, 8, tiny, reduced_side=4)
    holed = fast_cycles("weight_stream", shape, 8, 8, tiny, hole_fraction=0.2, reduced_side=4)
    assert holed.analytic_cycles == clean.analytic_cycles
    assert holed.cycles > clean.cycles


def test_fast_tier_is_deterministic(tiny):
    """The same arguments give the same estimate."""
    args = ("systolic", {"m": 32, "k": 64, "n": 32}, 8, 8, tiny)
    assert fast_cycles(*args, reduced_side=4).cycles == fast_cycles(*args, reduced_side=4).cycles


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"algo": "strassen"}, "has no fast tier"),
        ({"hole_fraction": 0.7}, r"hole_fraction=0.7 must be in \[0, 0.5\)"),
        ({"reduced_side": 1}, "reduced_side=1 must be an integer >= 2"),
    ],
)
def test_bad_arguments_are_clear_errors(kwargs, message, tiny):
    """Unknown algorithms and out-of-range knobs name the field."""
    args = {"algo": "summa", "shape": {"m": 8, "k": 8, "n": 8}, "rows": 4, "cols": 4,
            "spec": tiny} | kwargs  # fmt: skip
    with pytest.raises(ConfigError, match=message):
        fast_cycles(**args)
