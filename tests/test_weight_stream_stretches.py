"""A dense chain's chunks as loops by each PE's stretches (ProgramBuilder.repeat_each): the
rolled program runs bit for bit as the same program written out, and its op table no longer
grows with the chunks."""

import numpy as np
import pytest
from wafersim.fabric.program import ProgramBuilder
from wafersim.kernels import gemm_weight_stream as ws
from wafersim.kernels.fast_tier import grid_with_holes
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.kernel_plan import recorded
from wafersim.wafer.presets import preset

SPEC = preset("tiny")


def operands(m, k, n, seed=0):
    """Random float32 ``A`` (m x k) and ``B`` (k x n)."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(np.float32),
            rng.standard_normal((k, n)).astype(np.float32))  # fmt: skip


def program(a, b, grid, dtype, **options):
    """The op table a chain builds."""
    return recorded(ws.weight_stream, a, b, grid, SPEC, dtype, "chain", **options).program


def grid_of(grid):
    return grid_with_holes(12, 4, 0.1, seed=5) if grid == "holes" else kernel_grid(*grid)


CASES = [
    ((16, 2), (8, 16, 640), "fp32", {}),  # even rows, 2 chunks a row
    ((15, 2), (8, 15, 900), "fp16", {}),  # odd rows, 3 chunks a row
    ((12, 3), (6, 24, 761), "fp32", {}),  # two chunk widths
    ((1, 3), (6, 4, 320), "fp32", {}),  # one row: every chunk its root's
    ((9, 2), (8, 18, 288), "fp32", {"inputs": "streamed", "outputs": "gathered"}),
    ("holes", (16, 24, 576), "fp32", {}),
    ("holes", (16, 24, 576), "fp16", {}),
]


@pytest.mark.parametrize(("grid", "shape", "dtype", "options"), CASES)
def test_chain_stretches_run_as_written_out(monkeypatch, grid, shape, dtype, options):
    """A chain's stretches as loops: the run of the program written out, bit for bit
    (cycles, output, busy cycles, reasons), on odd and even rows, with several chunks a
    row, two widths, staged and with holes, in a shorter op table."""
    grid, (a, b) = grid_of(grid), operands(*shape)
    args = (a, b, grid, SPEC, dtype, "chain")
    rolled, rolled_ops = ws.weight_stream(*args, **options), program(a, b, grid, dtype, **options)
    monkeypatch.setattr(ProgramBuilder, "roll_loops", False)
    plain, plain_ops = ws.weight_stream(*args, **options), program(a, b, grid, dtype, **options)
    assert len(rolled_ops.ops) < len(plain_ops.ops)
    assert rolled.cycles == plain.cycles
    np.testing.assert_array_equal(rolled.output.view(np.uint32), plain.output.view(np.uint32))
    np.testing.assert_array_equal(rolled.pe_busy_cycles, plain.pe_busy_cycles)
    np.testing.assert_array_equal(rolled.pe_cycle_reasons, plain.pe_cycle_reasons)


@pytest.mark.parametrize(("grid", "shape", "dtype", "options"), CASES)
def test_chain_stretches_written_out_are_the_chunks(monkeypatch, grid, shape, dtype, options):
    """Written out, the stretches' program is the chunk by chunk one, row for row."""
    grid, (a, b) = grid_of(grid), operands(*shape)
    monkeypatch.setattr(ProgramBuilder, "roll_loops", False)
    stretched = program(a, b, grid, dtype, **options)
    monkeypatch.setattr(ws._Stretches, "of", classmethod(lambda cls, layout: None))
    chunked = program(a, b, grid, dtype, **options)
    for field in ("ops", "scalars", "task_start", "task_end"):
        np.testing.assert_array_equal(getattr(stretched, field), getattr(chunked, field))


def test_chain_program_stops_growing_with_its_chunks():
    """With two chunks a row, 16, 32 and 64 rows (32 to 128 chunks) store as many rows
    for the longest (PE, task) program."""
    longest = []
    for rows in (16, 32, 64):
        a, b = operands(4, rows, rows * 2 * 20)
        built = program(a, b, kernel_grid(rows, 2), "fp32")
        longest.append(int((built.task_end - built.task_start).max()))
    assert longest[0] == longest[1] == longest[2]
