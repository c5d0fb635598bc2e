"""Every tier refuses, with the same one line, what the cycle tier refuses, and no tier
answers for a clean patch on a patch with holes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from wafersim.kernels.gemm_algorithms import GEMM_ALGORITHMS
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.registry import analytic_cycles
from wafersim.kernels.tiers import TIERS, estimate
from wafersim.wafer.errors import ConfigError

from wafersim.cli import main

# the ``tiny`` fixture (tests/conftest.py): 8 x 8 logical PEs, one spare row, no spare column

# (kernel, algo, shape, options, grid width, height): more SRAM a PE than its 48 KB
TOO_BIG = [
    *(("gemm", algo, {"m": 8192, "k": 8192, "n": 8192}, {}, 64, 64) for algo in GEMM_ALGORITHMS),
    ("gemv", "ktree", {"m": 4096, "n": 4096}, {}, 8, 8),
    ("gemv", "chain", {"m": 512, "n": 6000}, {"inputs": "resident"}, 16, 16),
    ("stencil", "star25", {"n": 6134}, {}, 16, 16),
    ("allreduce", "chain", {"n": 20000}, {}, 4, 4),
]
ONE_PER_FAMILY = [
    ("gemm", "summa", {"m": 64, "k": 64, "n": 64}),
    ("gemv", "chain", {"m": 64, "n": 64}),
    ("stencil", "star7", {"n": 8}),
    ("allreduce", "tree", {"n": 8}),
]
HOLED_GEMV = ["--m", "512", "--n", "512", "--grid", "16x16", "--preset", "wse2",
              "--defect-density-per-cm2", "100", "--spare-rows", "3"]  # fmt: skip
GEMV_TOLERANCE = 0.10  # the analytic tier against the engine on a patch with holes


def refusals(call) -> dict[str, str]:
    """The ConfigError each tier raises, by tier."""
    messages = {}
    for tier in TIERS:
        with pytest.raises(ConfigError) as caught:
            call(tier)
        messages[tier] = str(caught.value)
    return messages


def cli_refusals(argv, capsys) -> dict[str, str]:
    """The one stderr line each tier exits 2 with, by tier."""
    lines = {}
    for tier in TIERS:
        assert main(["kernel", *argv, "--tier", tier]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert "Traceback" not in err
        lines[tier] = err
    return lines


def options_argv(options: dict) -> list[str]:
    return [word for name, value in options.items() for word in (f"--{name}", value)]


@pytest.mark.parametrize(("kernel", "algo", "shape", "options", "width", "height"), TOO_BIG)
def test_every_tier_refuses_a_share_beyond_sram_alike(kernel, algo, shape, options, width,
                                                      height, wse2):  # fmt: skip
    """A busiest PE beyond its SRAM, by the algorithm's own footprint: one message, every
    tier."""
    grid = kernel_grid(height, width)

    def call(tier):
        return estimate(kernel, algo, shape, grid, wse2, tier, **options)

    messages = refusals(call)
    assert len(set(messages.values())) == 1, messages
    assert "bytes of SRAM on its busiest PE" in messages["analytic"]


@pytest.mark.parametrize(("kernel", "algo", "shape", "options", "width", "height"), TOO_BIG)
def test_every_tier_refuses_a_share_beyond_sram_on_the_command_line(
    kernel, algo, shape, options, width, height, capsys
):
    """The same refusal from ``wafersim kernel``: exit 2, one line, the same in every tier."""
    sizes = [word for key, value in shape.items() for word in (f"--{key}", str(value))]
    argv = [kernel, "--algo", algo, *sizes, "--grid", f"{width}x{height}", "--preset", "wse2",
            *options_argv(options)]  # fmt: skip
    lines = cli_refusals(argv, capsys)
    assert len(set(lines.values())) == 1, lines
    assert "(pe.sram_bytes)" in lines["analytic"]


@pytest.mark.parametrize(("kernel", "algo", "shape"), ONE_PER_FAMILY)
def test_every_tier_refuses_a_grid_wider_than_the_wafer(kernel, algo, shape, tiny):
    """A grid wider or taller than the wafer's logical grid: one message, every tier."""
    for rows, cols in ((8, 9), (9, 8)):
        grid = kernel_grid(rows, cols)
        messages = refusals(lambda tier, g=grid: estimate(kernel, algo, shape, g, tiny, tier))
        assert len(set(messages.values())) == 1, messages
        assert "does not fit the tiny wafer" in messages["cycle"]


@pytest.mark.parametrize(("kernel", "algo", "shape"), ONE_PER_FAMILY)
def test_every_tier_refuses_a_grid_beyond_the_wafer_on_the_command_line(
    kernel, algo, shape, capsys
):
    """``--grid`` wider or taller than the wafer: exit 2, one line naming the allowed range,
    the same in every tier; ``wse2``'s 750 x 994 refuses 755 x 994 and 2000 x 2000 before
    any patch is built."""
    sizes = [word for key, value in shape.items() for word in (f"--{key}", str(value))]
    base = [kernel, "--algo", algo, *sizes]
    for grid in ("9x8", "8x9"):
        lines = cli_refusals([*base, "--grid", grid, "--preset", "tiny"], capsys)
        assert len(set(lines.values())) == 1, lines
        assert "width must be in [1, 8] (logical_width_pes)" in lines["cycle"]
    for grid in ("755x994", "750x995", "2000x2000"):
        for tier in ("analytic", "fast"):  # the cycle tier would run a whole wafer before
            assert main(["kernel", *base, "--grid", grid, "--preset", "wse2", "--tier", tier]) == 2
            err = capsys.readouterr().err
            assert f"grid {grid} (WxH) does not fit the wse2 wafer: width must be in" in err
            assert err.count("\n") == 1


def test_every_tier_refuses_holes_pushing_the_patch_off_the_wafer(tiny):
    """Columns skipped round holes may not take the patch past the wafer's last column."""
    dead = np.zeros((9, 9), bool)
    dead[[0, 1], 3] = True  # patch column 3 is short of working PEs: 9 is used instead
    grid = kernel_grid(8, 8, dead, lines=np.array([0, 1, 2, 4, 5, 6, 7, 8]))
    shape = {"m": 64, "k": 64, "n": 64}
    messages = refusals(lambda tier: estimate("gemm", "summa", shape, grid, tiny, tier))
    assert len(set(messages.values())) == 1, messages
    assert "sits on a 9x8 patch" in messages["cycle"]


def test_the_analytic_tier_refuses_a_collective_short_of_colors(tiny):
    """A collective that needs more colors than the router leaves kernels is refused by
    the analytic tier with the cycle tier's message."""
    spec = tiny.replace({"router.colors": 8})  # four colors left for kernels
    grid, shape = kernel_grid(8, 8), {"n": 8}
    messages = {
        tier: pytest.raises(ConfigError, estimate, "allreduce", "ktree", shape, grid, spec, tier)
        for tier in ("cycle", "analytic")
    }
    assert str(messages["cycle"].value) == str(messages["analytic"].value)
    assert "needs" in str(messages["analytic"].value)


@pytest.mark.parametrize(
    ("kernel", "algo", "shape"),
    [("stencil", "star7", {"n": 8}), ("stencil", "star25", {"n": 8}),
     ("allreduce", "chain", {"n": 16}), ("broadcast", "ktree", {"n": 16}),
     ("scatter", "tree", {"n": 64})],
)  # fmt: skip
def test_the_analytic_tier_refuses_stencils_and_collectives_on_holes(kernel, algo, shape, wse2):
    """Their analytic costs know no holes: on a patch with one the tier refuses, naming
    the cycle tier, rather than answer for a clean patch; on a clean one it answers."""
    dead = np.zeros((9, 8), bool)
    dead[2, 3] = True
    with pytest.raises(ConfigError, match=r"patch without holes.*use tier='cycle'"):
        estimate(kernel, algo, shape, kernel_grid(8, 8, dead), wse2, "analytic")
    assert estimate(kernel, algo, shape, kernel_grid(8, 8), wse2, "analytic").cycles > 0


@pytest.mark.parametrize("algo", ["ktree", "chain", "tree"])
def test_the_analytic_tier_counts_a_gemv_s_holes(algo, capsys, wse2):
    """GEMV on 16 x 16 PEs with 28 holes (one north port feeds two columns, rows step round
    holes): the analytic tier is within 10 % of the engine, not the clean estimate, which
    a clean patch keeps."""
    cycles = {}
    for tier in ("cycle", "analytic"):
        assert main(["kernel", "gemv", "--algo", algo, *HOLED_GEMV, "--tier", tier, "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["holes"] == 28
        cycles[tier] = result["cycles"]
    clean = analytic_cycles("gemv", algo, {"m": 512, "n": 512}, 16, 16, wse2)
    assert cycles["analytic"] == pytest.approx(cycles["cycle"], rel=GEMV_TOLERANCE)
    assert cycles["analytic"] > 1.3 * clean
    on_clean = estimate("gemv", algo, {"m": 512, "n": 512}, kernel_grid(16, 16), wse2, "analytic")
    assert on_clean.cycles == clean
