"""Ragged SRAM images (fabric.sram): each PE holds the words it uses, read like a 2D array."""

import numpy as np
import pytest
from wafersim.fabric import sram
from wafersim.fabric.sram import SramImage, SramLoads, sram_image, zeros
from wafersim.kernels.gemm_weight_stream import weight_stream
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.kernel_plan import recorded
from wafersim.wafer.errors import ConfigError


def test_an_image_reads_each_pe_words_as_a_row_would():
    image = zeros([3, 1, 5])
    image.words(2)[:] = [1, 2, 3, 4, 5]
    image[0, 1:3] = 7  # a slice is a view: writes land in the image
    assert image.flat.tolist() == [0, 7, 7, 0, 1, 2, 3, 4, 5]
    assert image[2, 4] == 5
    assert image[1].tolist() == [0]
    assert image.sizes.tolist() == [3, 1, 5]
    assert image.pes == 3


def test_a_rectangular_memory_becomes_an_image_and_a_wrong_shape_names_it():
    memory = np.arange(6, dtype=np.float32).reshape(3, 2)
    image = sram_image(memory, 3)
    assert image[1].tolist() == [2, 3]
    assert image.sizes.tolist() == [2, 2, 2]
    with pytest.raises(ConfigError, match=r"memory of shape \(3, 2\) must be \(PEs=4, words\)"):
        sram_image(memory, 4)
    with pytest.raises(ConfigError, match="memory holds 3 PEs' SRAM: must cover all 4 PEs"):
        sram_image(image, 4)
    short = SramImage(image.flat[:5], image.base)
    with pytest.raises(ConfigError, match="memory.base must rise from 0 by at least one word"):
        sram_image(short, 3)


def test_a_kernel_image_holds_what_each_pe_uses_not_the_fullest_port_everywhere(wse2):
    """A weight-streaming GEMM's west ports hold its row's whole weight stream (the
    MemoryX stand-in); the wafer PEs a few tiles. The run's SRAM is their sum."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((32, 64)), rng.standard_normal((64, 1024))
    record = recorded(weight_stream, a, b, kernel_grid(4, 4), wse2, "fp32")
    used, memory = record.plan.used, record.memory
    assert isinstance(memory, SramLoads)
    np.testing.assert_array_equal(memory.sizes, np.maximum(used, 1))
    assert memory.sizes.sum() < 0.3 * used.size * used.max()  # the rectangle: 0.27 here


def test_loads_hold_each_pe_words_up_to_its_last_loaded_one_and_read_zeros_past_it():
    """A PE's words past its loaded ones read as zeros; a PE loaded with nothing too."""
    loads = SramLoads(np.array([1, 2, 3], np.float32), np.array([0, 2, 2, 3]), np.array([4, 1, 2]))
    assert loads[0].tolist() == [1, 2, 0, 0]
    assert loads[1].tolist() == [0]
    assert loads[2, 0:2].tolist() == [3, 0]
    assert loads.pes == 3
    dense = loads.dense()
    assert dense.flat.tolist() == [1, 2, 0, 0, 0, 3, 0]
    np.testing.assert_array_equal(dense.sizes, loads.sizes)


def test_loads_fill_an_image_a_slice_of_pes_at_a_time(monkeypatch):
    """Placed in slices of about FILL_WORDS words, the words land where one slice puts them."""
    rng = np.random.default_rng(1)
    loaded = rng.integers(0, 6, 40)
    base = np.concatenate([[0], np.cumsum(loaded)])
    loads = SramLoads(rng.standard_normal(base[-1]).astype(np.float32), base, loaded + 3)
    whole = loads.dense()
    monkeypatch.setattr(sram, "FILL_WORDS", 7)
    np.testing.assert_array_equal(loads.dense().flat, whole.flat)
    for pe in range(40):
        np.testing.assert_array_equal(whole[pe], loads[pe])


def test_a_plan_leaves_out_the_zeroed_buffers_past_each_pe_loads(wse2):
    """A weight-streaming plan's PEs hold their A tile first; C and the partial sums after
    it start zero and are not in the plan's words, but the run starts from them all."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((32, 64)), rng.standard_normal((64, 1024))
    grid = kernel_grid(4, 4)
    record = recorded(weight_stream, a, b, grid, wse2, "fp32")
    memory, pe = record.memory, int(grid.pe[1, 2])
    tile_words = (32 // 4) * (64 // 4)
    assert memory.base[pe + 1] - memory.base[pe] == tile_words
    assert memory.sizes[pe] > 2 * tile_words
    pes = grid.pe.reshape(-1)
    assert np.diff(memory.base)[pes].sum() < 0.4 * memory.sizes[pes].sum()
    assert not memory[pe, tile_words:].any()


def test_loads_that_do_not_fit_their_sizes_or_layout_are_refused():
    """Before the run: more loaded words than a PE holds, a layout that does not cover
    ``flat`` from word 0 up, or another count of PEs, each named."""
    loads = SramLoads(np.zeros(3, np.float32), np.array([0, 3]), np.array([2]))
    with pytest.raises(ConfigError, match="memory.sizes must hold at least one word"):
        sram_image(loads, 1)
    for base in ([0, 2], [1, 3], [0, 4]):
        short = SramLoads(np.zeros(3, np.float32), np.array(base), np.array([5]))
        with pytest.raises(ConfigError, match="memory.base must rise from 0 to memory.flat's"):
            sram_image(short, 1)
    with pytest.raises(ConfigError, match="memory holds 1 PEs' SRAM: must cover all 2 PEs"):
        sram_image(loads, 2)
