"""bf16 wherever fp16 is accepted: storage as the top 16 bits of an fp32, rounded
to nearest even, arithmetic in fp32; bit-exact against a reference written out here (numpy
has no bfloat16): the two bf16 neighbours of a value compared exactly in float64."""

from __future__ import annotations

import math

import numpy as np
import pytest
from wafersim.fabric._fp16 import bf16_to_float, float_to_bf16
from wafersim.fabric.engine import simulate
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.program import ProgramBuilder, pack_half, unpack_half
from wafersim.fabric.routes import ColorRoutes
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.registry import run_kernel

WORDS = 128


def reference_bits(x: np.float32) -> int:
    """bf16 bits of ``x``, nearest to it (ties to the even one), found without bit tricks:
    the two bf16 values around ``x`` (truncated, and one step away from zero) compared
    with ``x`` in float64, where all three are exact."""
    bits = int(np.float32(x).view(np.uint32))
    if np.isnan(x):
        return -1  # any NaN
    low = bits >> 16
    high = low + 1  # one step further from zero (may be the infinity)

    def value(b: int) -> float:
        """Its value; the infinity stands for 2**128, the next step (IEEE overflow)."""
        if (b & 0x7F80) == 0x7F80:
            return math.copysign(2.0**128, float(x))
        return float(np.uint32((b & 0xFFFF) << 16).view(np.float32))

    exact = float(x)
    if (low & 0x7F80) == 0x7F80:  # +-inf: nothing beyond
        return low
    below, above = abs(exact - value(low)), abs(value(high) - exact)
    if below < above or (below == above and low % 2 == 0):
        return low
    return high


def _values() -> np.ndarray:
    rng = np.random.default_rng(7)
    special = np.array([0.0, -0.0, 1.0, -1.0, 1.00390625, 1.01171875, 3.4e38, -3.4e38,
                        np.inf, -np.inf, np.nan, 1e-40, -1e-45, 1.17549435e-38, 65504.0],
                       np.float32)  # fmt: skip
    ties = (rng.integers(0, 2**15, 200, dtype=np.uint32) << 16 | 0x8000).view(np.float32)
    random = rng.integers(0, 2**32, 2000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([special, ties, random])


def test_rounding_to_bf16_is_bit_exact_on_the_engine_and_the_host():
    values = _values()
    host = pack_half(values, "bf16").view(np.uint16)[: values.size]
    for x, from_host in zip(values, host, strict=True):
        expected = reference_bits(x)
        engine = float_to_bf16(x)
        if expected < 0:  # NaN stays NaN on both
            assert np.isnan(bf16_to_float(engine))
            assert np.isnan(bf16_to_float(int(from_host)))
            continue
        assert engine == expected, hex(int(np.float32(x).view(np.uint32)))
        assert int(from_host) == expected
    assert np.array_equal(unpack_half(pack_half(values, "bf16"), values.size, "bf16")[:15],
                          np.array([bf16_to_float(reference_bits(v)) if not np.isnan(v)
                                    else np.nan for v in values[:15]], np.float32),
                          equal_nan=True)  # fmt: skip


def test_ml_dtypes_agrees_where_it_is_installed():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    values = _values()
    with np.errstate(invalid="ignore", over="ignore"):  # its cast warns on NaN and overflow
        theirs = values.astype(ml_dtypes.bfloat16).view(np.uint16)
    ours = pack_half(values, "bf16").view(np.uint16)[: values.size]
    finite = ~np.isnan(values)
    assert np.array_equal(theirs[finite], ours[finite])


def _round(v) -> np.ndarray:
    """float32 values rounded to bf16 by the reference, as float32."""
    return np.array([bf16_to_float(reference_bits(np.float32(x))) for x in np.ravel(v)],
                    np.float32)  # fmt: skip


def test_bf16_local_ops_and_recv_add_round_each_result(tiny):
    """vadd, vscale, vfma and recv_add in bf16: fp32 arithmetic, each result rounded."""
    m = 9
    mesh = Mesh.full(2, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add_path(0, [0, 1])
    prog = ProgramBuilder(2, tiny.pe, 1)
    prog.vadd(0, 0, 40, 0, 10, m, dtype="bf16")
    prog.vscale(0, 0, 60, 0, 0.3, m, dtype="bf16")
    prog.vfma(0, 0, 80, 0, 10, m, dtype="bf16")
    prog.send(0, 0, 0, 0, m, dtype="bf16")
    prog.recv_add(1, 0, 0, 20, m, dtype="bf16")
    rng = np.random.default_rng(3)
    a, b, c, d = (rng.standard_normal(m).astype(np.float32) for _ in range(4))
    mem = np.zeros((2, WORDS), np.float32)
    mem[0, 0:5], mem[0, 10:15], mem[0, 80:85] = (pack_half(v, "bf16") for v in (a, b, c))
    mem[1, 20:25] = pack_half(d, "bf16")
    result = simulate(mesh, tiny, routes, prog.build(), mem, max_cycles=2000)
    ra, rb, rc, rd = (_round(v) for v in (a, b, c, d))
    out = {addr: unpack_half(result.mem[pe, addr : addr + 5], m, "bf16")
           for pe, addr in ((0, 40), (0, 60), (0, 80), (1, 20))}  # fmt: skip
    np.testing.assert_array_equal(out[40], _round(ra + rb))
    np.testing.assert_array_equal(out[60], _round(ra * np.float32(0.3)))
    np.testing.assert_array_equal(out[80], _round(rc + ra * rb))
    np.testing.assert_array_equal(out[20], _round(ra + rd))


@pytest.mark.parametrize("algo", ["summa", "weight_stream"])
def test_bf16_gemm_equals_numpy_on_its_stored_inputs(algo, tiny):
    """A GEMM in bf16: inputs stored as bf16, fp32 accumulation; the output within bf16's
    rounding of the float64 product of the stored inputs, and as many cycles as fp16 (the
    same 16-bit FMAC rate and words)."""
    grid = kernel_grid(4, 4)
    shape = {"m": 32, "k": 32, "n": 32}
    bf16 = run_kernel("gemm", algo, shape, grid, tiny, dtype="bf16", seed=1)
    fp16 = run_kernel("gemm", algo, shape, grid, tiny, dtype="fp16", seed=1)
    assert bf16.cycles == fp16.cycles
    scale = np.abs(bf16.output).max()
    assert bf16.max_abs_error <= scale * 2.0**-7
    assert bf16.max_abs_error > 0  # the output is rounded: bf16, not a copy of fp32
