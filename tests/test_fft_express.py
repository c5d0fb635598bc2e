"""The express all-to-all: relays every ``stride`` PEs, the routers between handing out blocks
with counter filters, each value landing at its sender's word through a strided receive."""

import pytest
from wafersim.kernels.fft import run_line
from wafersim.kernels.fft_express import run_express_line
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
