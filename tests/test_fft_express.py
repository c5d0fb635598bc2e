"""The express all-to-all: relays every ``stride`` PEs, the routers between handing out blocks
with counter filters, each value landing at its sender's word through a strided receive."""

import numpy as np
import pytest
from wafersim.kernels.fft import fft3d, run_line
from wafersim.kernels.fft_express import EXPRESS, run_express_line
from wafersim.kernels.fft_family import FFT, fft3d_colors
from wafersim.kernels.grid import kernel_grid
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset

SPEC = preset("wse2")


@pytest.mark.parametrize(("n", "stride"), [(4, 2), (8, 3), (16, 2), (16, 4), (32, 3)])
def test_every_value_lands_at_its_senders_word(n, stride):
    cycles, exact = run_express_line(n, stride, SPEC, seed=n + stride)
    assert exact
    assert cycles > 0


@pytest.mark.parametrize("n", [8, 32])
def test_stride_one_is_the_relays_bit_for_bit_in_time(n):
    """Stride 1 relays at every PE with no router between: the relays' program, cycle for
    cycle (the filters then take every block up to the relay's own)."""
    assert run_express_line(n, 1, SPEC)[0] == run_line(n, SPEC)


def test_forwarding_between_relays_beats_relaying_at_every_pe():
    """At 64 PEs the ramps of the relays' middle PEs bound them; two PEs a relay halves
    what enters a ramp."""
    assert run_express_line(64, 2, SPEC)[0] < 0.6 * run_line(64, SPEC)


@pytest.mark.parametrize("stride", [0, 5, 2.0, "2"])
def test_a_bad_stride_is_refused_with_one_line(stride):
    with pytest.raises(ConfigError, match=r"stride=.* is out of range \[1, 4\]"):
        run_express_line(16, stride, SPEC)


def _cube(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, n, n)) + 1j * rng.standard_normal((n, n, n))).astype(
        np.complex64
    )


def _assert_fp32_exact(output: np.ndarray, x: np.ndarray) -> None:
    """Within fp32 rounding of numpy's transform (as tests/test_fft.py asks)."""
    expected = np.fft.fftn(x.astype(np.complex128))
    assert np.abs(output - expected).max() <= 1e-5 * np.log2(x.shape[0]) * np.abs(expected).max()


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_the_3d_fft_on_express_transposes_equals_numpy(n):
    """The 3D FFT with its four all-to-alls as express relays: numpy's transform in the
    input's layout, on the colors the family's rule says (stride + 1 a direction a phase),
    its analytic tier (one line's pair run on the engine) within 1 % of the whole run."""
    x = _cube(n, seed=n)
    result = fft3d(x, kernel_grid(n, n), SPEC, EXPRESS)
    _assert_fp32_exact(result.output, x)
    assert result.algo == "express"
    assert result.colors_used == fft3d_colors("express", {"n": n}, n, n, SPEC)
    assert abs(result.analytic_cycles / result.cycles - 1) < 0.01


def test_the_express_fft_runs_on_patches_with_holes():
    """Dead PEs: the streams detour round them on colors of their own, each kernel PE's
    router still handing its PE its block."""
    dead = np.zeros((9, 9), bool)
    dead[[1, 4], [2, 5]] = True
    x = _cube(8, seed=5)
    result = fft3d(x, kernel_grid(8, 8, dead), SPEC, EXPRESS)
    _assert_fp32_exact(result.output, x)


def test_the_express_fft_is_faster_than_the_relays_and_registered():
    x = _cube(16, seed=2)
    express = fft3d(x, kernel_grid(16, 16), SPEC, EXPRESS).cycles
    assert express < fft3d(x, kernel_grid(16, 16), SPEC).cycles
    assert FFT.algorithms["express"].analytic_cycles("express", {"n": 16}, 16, 16, SPEC, "fp32") > 0
