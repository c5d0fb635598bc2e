"""Ragged SRAM images (fabric.sram): each PE holds the words it uses, read like a 2D array."""

import numpy as np
import pytest
from wafersim.fabric.sram import SramImage, sram_image, zeros
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
    assert isinstance(memory, SramImage)
    np.testing.assert_array_equal(memory.sizes, np.maximum(used, 1))
    assert memory.flat.size < 0.3 * used.size * used.max()  # the rectangle: 0.27 here
