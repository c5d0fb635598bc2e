"""Building a kernel's plan in bulk (a whole wafer's): each bulk path gives what the plain
one-at-a-time path gives, op for op and word for word."""

import numpy as np
import pytest
from wafersim.fabric import _engine_jit as K
from wafersim.fabric.program import ProgramBuilder, pack_half
from wafersim.fabric.state import OP_DTYPE
from wafersim.fabric.switches import switch_ops
from wafersim.kernels import sparse_weights
from wafersim.kernels.gemm_weight_stream import (
    MODES,
    chunk_offsets,
    encode_row_blocks,
    weight_stream,
)
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.kernel_plan import KernelPlan, encode, recorded, split
from wafersim.kernels.lines import kept, reduce_lines
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset

SPEC = preset("tiny")


def programs(built, pes: int, tasks: int) -> dict[tuple[int, int], list[list[int]]]:
    """Each (PE, task)'s op rows, from a built program."""
    return {
        (pe, t): built.ops[built.task_start[pe, t] : built.task_end[pe, t]].tolist()
        for pe in range(pes)
        for t in range(tasks)
    }


def test_a_built_table_holds_each_pes_ops_in_the_order_added():
    """Ops added one PE at a time and many at once, a PE twice in one call, then shared:
    every (PE, task) runs exactly the ops added to it (or its model), in the order added."""
    pes, tasks, rng = 12, 2, np.random.default_rng(4)
    prog = ProgramBuilder(pes, SPEC.pe, 2, tasks)
    want: dict[tuple[int, int], list[int]] = {
        (pe, t): [] for pe in range(pes) for t in range(tasks)
    }
    for tag in range(1, 60):  # vadd's dst names the op
        task = int(rng.integers(tasks))
        if tag % 3:
            pe = rng.integers(0, 9, size=int(rng.integers(1, 7)))  # repeats included
            prog.vadd(pe, task, tag + 100 * np.arange(pe.size), 0, 0, 4)
            for i, p in enumerate(pe.tolist()):
                want[p, task].append(tag + 100 * i)
        else:
            pe = int(rng.integers(0, 9))
            prog.vadd(pe, task, tag, 0, 0, 4)
            want[pe, task].append(tag)
    prog.share([9, 10, 11], [2, 5, 5])
    for pe, like in ((9, 2), (10, 5), (11, 5)):
        for t in range(tasks):
            want[pe, t] = want[like, t]
    got = programs(prog.build(), pes, tasks)
    assert {key: [row[K.C_DST] for row in rows] for key, rows in got.items()} == want


def test_many_pe_columns_keep_their_values_up_to_the_tables_limit():
    """A column of int32 values is kept whole; scalars go with their ops."""
    prog = ProgramBuilder(3, SPEC.pe, 1, sram_words=np.full(3, 2**40))
    far = np.array([5, 2**31 - 4, 7], np.int64)
    prog.recv_add(np.array([2, 0, 1]), 0, 0, far, 3, scale=0.5)
    built = prog.build()
    assert built.ops.dtype == OP_DTYPE == np.int32
    assert built.ops[:, K.C_DST].tolist() == [2**31 - 4, 7, 5]
    assert built.scalars.tolist() == [0.5, 0.5, 0.5]


@pytest.mark.parametrize("many", [False, True])
def test_an_op_field_beyond_the_tables_type_is_refused(many):
    """An address past int32 (an edge port's SRAM is unlimited) is refused, naming the
    field, one PE's op or many's, never wrapped."""
    prog = ProgramBuilder(3, SPEC.pe, 1, sram_words=np.full(3, 2**40))
    if many:
        add = lambda: prog.recv(np.array([2, 0]), 0, 0, np.array([5, 2**33]), 3)  # noqa: E731
    else:
        prog.recv(1, 0, 0, 2**33, 3)  # one PE's ops are checked when packed
        add = prog.build
    with pytest.raises(ConfigError, match="op field dst=8589934592 does not fit"):
        add()


def test_a_final_build_frees_the_builders_ops_and_takes_no_more():
    """build(final=True) gives the table build() gives and leaves no block behind; the
    builder then refuses more ops and another build."""
    tables = []
    for final in (False, True):
        prog = ProgramBuilder(4, SPEC.pe, 2, tasks=2)
        prog.vadd(np.array([3, 1, 3]), 1, np.array([4, 5, 6]), 0, 0, 4)
        prog.vscale(2, 0, 7, 0, 2.0, 4)
        prog.send(np.array([0, 2]), 0, 1, 0, 8)
        tables.append(prog.build(final=final))
    for plain, final in zip(*tables, strict=True):
        np.testing.assert_array_equal(plain, final)
    assert prog._blocks == []
    assert prog._rows == []
    with pytest.raises(ConfigError, match="final=True"):
        prog.vadd(0, 0, 0, 0, 0, 4)
    with pytest.raises(ConfigError, match="final=True"):
        prog.build()


def test_a_switch_keeps_its_whole_position_in_32_bit_fields():
    """A switch position (five 5-bit output masks, the ramp's the highest) survives the
    int32 table: the engine and fabric.switches read the position that was set."""
    prog = ProgramBuilder(3, SPEC.pe, 2)
    masks = np.array([[1, 0, 4, 0, 0], [0, 2, 0, 8, 31]], np.uint8)
    prog.switch(1, 0, 0, masks[1])
    prog.switch(np.array([2, 0]), 0, 1, masks)
    built = prog.build()
    assert built.ops.dtype == np.int32
    found = switch_ops(built)
    assert found.pes.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(found.positions, masks[[1, 1, 0]])


CASES = [("fp32", 13, 700, 19), ("fp16", 13, 700, 19), ("bf16", 12, 640, 20), ("fp16", 1, 33, 5)]


@pytest.mark.parametrize(("dtype", "ki", "n", "rows"), CASES)
def test_a_rows_blocks_as_arrays_are_encode_rows_blocks(dtype, ki, n, rows):
    """encode_row_blocks gives encode_row's blocks (modes, sizes, counts, words, index words)
    for a row without zeros, with a few, with tiny values fp16 flushes, and with none left."""
    row = np.random.default_rng(ki).standard_normal((ki, n)).astype(np.float32)
    chunks = chunk_offsets(n, rows)
    variants = (
        row,
        np.where(row > 2.0, np.float32(-0.0), row),  # a zero of either sign is zero
        np.where(row > 2.0, np.float32(1e-9), row),  # flushed to zero in fp16
        np.where(row > 2.0, np.float32(1e6), row),  # fp16: inf, which is sent
        np.where(np.abs(row) < 1.5, np.float32(0), row),  # mostly zero: sparse blocks
        np.zeros_like(row),  # every block empty
    )
    for values in variants:
        with np.errstate(over="ignore"):
            blocks = sparse_weights.encode_row(values, chunks, dtype)
            got = encode_row_blocks(values, chunks, dtype)
        assert got.mode.tolist() == [MODES.index(x.mode) for x in blocks]
        assert got.sizes.tolist() == [len(x.data) for x in blocks]
        assert got.nonzeros.tolist() == [x.nonzeros for x in blocks]
        assert got.multiplied.tolist() == [x.multiplied for x in blocks]
        data = np.concatenate([x.data for x in blocks])
        np.testing.assert_array_equal(got.data.view(np.uint32), data.view(np.uint32))
        fixed = np.concatenate([x.index_words for x in blocks])
        assert (got.fixed is None) == (not fixed.any())
        assert got.fixed is None or np.array_equal(got.fixed, fixed)


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_a_weight_stream_image_holds_each_tile_and_block_as_encoded_alone(dtype):
    """On a ragged grid (odd tiles), each PE's A tile is encode(tile.T) at word 0 and each
    west port holds its row's blocks one after another, as encode_row encodes them."""
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((11, 13)), rng.standard_normal((13, 41))
    grid, rows, cols = kernel_grid(3, 4), 3, 4
    record = recorded(weight_stream, a, b, grid, SPEC, dtype)
    ms, ks, chunks = split(11, cols, "m"), split(13, rows, "k"), chunk_offsets(41, rows)
    memory = record.memory
    for i in range(rows):
        for j in range(cols):
            tile = encode(a[ms[j] : ms[j + 1], ks[i] : ks[i + 1]].T, dtype)
            got = memory[grid.pe[i, j], : len(tile)]
            np.testing.assert_array_equal(got.view(np.uint32), tile.view(np.uint32))
        blocks = sparse_weights.encode_row(b[ks[i] : ks[i + 1]].astype(np.float32), chunks, dtype)
        words = np.concatenate([x.data for x in blocks])
        got = memory[grid.west_port(i), : len(words)]
        np.testing.assert_array_equal(got.view(np.uint32), words.view(np.uint32))


def test_bulk_and_later_loads_fill_the_image_as_one_pe_loads_do():
    """load_many and load_later put each PE's words where load would."""
    grid = kernel_grid(2, 3)
    pes = grid.pe.reshape(-1)
    words = [np.arange(1 + p % 3, dtype=np.float32) + 10 * p for p in range(len(pes))]
    images = []
    for how in ("one", "many", "later"):
        plan = KernelPlan(grid, SPEC)
        addrs = plan.alloc_many(pes, 5, "pad") + 2
        if how == "one":
            for pe, addr, data in zip(pes, addrs, words, strict=True):
                plan.load(int(pe), int(addr), data)
        elif how == "many":
            sizes = [len(w) for w in words]
            plan.load_many(pes, addrs, np.concatenate(words), sizes)
        else:
            for pe, addr, data in zip(pes, addrs, words, strict=True):
                plan.load_later(int(pe), int(addr), len(data), lambda data=data: data)
        images.append(plan._memory())
    for image in images[1:]:
        np.testing.assert_array_equal(image.flat, images[0].flat)
        np.testing.assert_array_equal(image.base, images[0].base)
    assert images[0][grid.pe[1, 2], 2:5].tolist() == (words[5]).tolist()


def test_reducing_with_a_kept_mask_found_once_adds_the_same_ops():
    """reduce_lines with kept(mask) adds the ops it adds with the mask itself."""
    built = []
    for once in (False, True):
        grid = kernel_grid(5, 3)
        plan = KernelPlan(grid, SPEC)
        lines = grid.pe.T
        mask = np.ones(lines.shape, bool)
        mask[1, 2:] = False  # PEs sharing another's program get no ops
        keep = kept(mask) if once else mask
        addrs = np.zeros(lines.shape, np.int64)
        for root in (0, 3, 4, 3):
            reduce_lines(plan, lines, root, addrs, 4, "chain", [1, 2, 3, 4],
                         [("c", j) for j in range(3)], keep=keep)  # fmt: skip
        built.append(plan.prog.build())
    np.testing.assert_array_equal(built[0].ops, built[1].ops)
    np.testing.assert_array_equal(built[0].task_start, built[1].task_start)


def test_a_half_row_is_zero_only_where_its_bits_say_so():
    """The sign-free bits test encode_row_blocks uses finds the zeros stored_nonzero finds."""
    values = np.array([0.0, -0.0, 1e-9, -1e-9, 6e-8, 1e6, np.inf, np.nan, 1.0], np.float32)
    for dtype in ("fp16", "bf16"):
        with np.errstate(over="ignore"):
            bits = pack_half(values, dtype).view(np.uint16)[: values.size]
        np.testing.assert_array_equal(
            (bits & 0x7FFF) != 0, sparse_weights.stored_nonzero(values, dtype)
        )
