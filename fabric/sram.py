"""Every PE's SRAM as one ragged array: each PE holds as many words as it uses.

A kernel's PEs use a few hundred words; its edge ports, which stand for MemoryX, hold whole
weight streams (a GPT-3 layer's row of weights is half a million words). A rectangular
``(PEs, most words)`` array sized every PE like the fullest port: for a whole wafer, petabytes.
Here PE ``p``'s words are ``flat[base[p]:base[p + 1]]``, and ``image[p, i]`` reads them as a
2D array's row would.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from wafersim.wafer.errors import ConfigError


@dataclass(frozen=True)
class SramImage:
    """SRAM words of ``pes`` PEs: ``flat`` float32, PE ``p``'s at ``base[p]:base[p + 1]``."""

    flat: np.ndarray  # float32 (total words,)
    base: np.ndarray  # int64 (P + 1,)

    @property
    def pes(self) -> int:
        return len(self.base) - 1

    @property
    def sizes(self) -> np.ndarray:
        """Words each PE holds (int64 (P,))."""
        return np.diff(self.base)

    def words(self, pe: int) -> np.ndarray:
        """PE ``pe``'s words: a view (writes go to the image)."""
        return self.flat[self.base[pe] : self.base[pe + 1]]

    def __getitem__(self, key):
        """``image[pe]``: the PE's words; ``image[pe, i]``: an index or slice of them."""
        if isinstance(key, tuple):
            pe, index = key
            return self.words(int(pe))[index]
        return self.words(int(key))

    def __setitem__(self, key, value) -> None:
        pe, index = key if isinstance(key, tuple) else (key, slice(None))
        self.words(int(pe))[index] = value

    def copy(self) -> SramImage:
        return SramImage(self.flat.copy(), self.base)


def zeros(sizes) -> SramImage:
    """An image of zero words, ``sizes[p]`` (at least one) for PE ``p``."""
    sizes = np.maximum(np.asarray(sizes, np.int64), 1)
    base = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return SramImage(np.zeros(int(base[-1]), np.float32), base)


def sram_image(memory, pes: int) -> SramImage:
    """``memory`` as an image of ``pes`` PEs: an image as it is, or a float32
    ``(pes, words)`` array (copied), every PE ``words`` long."""
    if isinstance(memory, SramImage):
        if memory.pes != pes:
            raise ConfigError(f"memory holds {memory.pes} PEs' SRAM: must cover all {pes} PEs")
        base = np.asarray(memory.base)
        if base[0] != 0 or (np.diff(base) < 1).any() or memory.flat.size != base[-1]:
            raise ConfigError(
                "memory.base must rise from 0 by at least one word a PE to memory.flat's "
                f"{memory.flat.size} words"
            )
        return memory
    memory = np.asarray(memory, np.float32)
    if memory.ndim != 2 or memory.shape[0] != pes:
        raise ConfigError(f"memory of shape {memory.shape} must be (PEs={pes}, words)")
    image = zeros(np.full(pes, memory.shape[1]))
    if memory.shape[1]:
        image.flat[:] = memory.reshape(-1)
    return image
