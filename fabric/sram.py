"""Every PE's SRAM as one ragged array: each PE holds as many words as it uses.

A kernel's PEs use a few hundred words; its edge ports, which stand for MemoryX, hold whole
weight streams (a GPT-3 layer's row of weights is half a million words). A rectangular
``(PEs, most words)`` array sized every PE like the fullest port: for a whole wafer, petabytes.
Here PE ``p``'s words are ``flat[base[p]:base[p + 1]]``, and ``image[p, i]`` reads them as a
2D array's row would. A plan's image (:class:`SramLoads`) leaves out each PE's words past the
last it is loaded with, which start zero: a GEMM's output and partial sums, a third of a whole
wafer's words, then take no memory before a run.
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


@dataclass(frozen=True)
class SramLoads:
    """Every PE's SRAM as the words it is loaded with and its size: PE ``p`` holds
    ``sizes[p]`` words, of which the first ``base[p + 1] - base[p]`` are ``flat[base[p]:
    base[p + 1]]`` and the rest zeros. Reads as an :class:`SramImage` does (copies)."""

    flat: np.ndarray  # float32 (loaded words,)
    base: np.ndarray  # int64 (P + 1,): each PE's loaded words in ``flat``
    sizes: np.ndarray  # int64 (P,): each PE's words, at least its loaded ones and one

    @property
    def pes(self) -> int:
        return len(self.sizes)

    def words(self, pe: int) -> np.ndarray:
        """PE ``pe``'s words, the zeros after its loaded ones too (a copy)."""
        out = np.zeros(int(self.sizes[pe]), np.float32)
        loaded = self.flat[self.base[pe] : self.base[pe + 1]]
        out[: len(loaded)] = loaded
        return out

    def __getitem__(self, key):
        """``loads[pe]``: the PE's words; ``loads[pe, i]``: an index or slice of them."""
        if isinstance(key, tuple):
            pe, index = key
            return self.words(int(pe))[index]
        return self.words(int(key))

    def fill(self, flat: np.ndarray, base: np.ndarray) -> None:
        """Write the loaded words into a zeroed image's ``flat`` laid out by ``base`` (each
        PE's words at ``base[p]``), PEs with about :data:`FILL_WORDS` words at a time: a
        whole wafer's loaded words are hundreds of millions, their positions int64."""
        loaded = np.diff(self.base)
        cut = np.searchsorted(self.base[1:], np.arange(FILL_WORDS, self.base[-1], FILL_WORDS))
        for lo, hi in zip([0, *cut.tolist()], [*cut.tolist(), self.pes], strict=True):
            words = slice(int(self.base[lo]), int(self.base[hi]))
            if words.start == words.stop:
                continue
            shift = np.repeat(base[lo:hi] - self.base[lo:hi], loaded[lo:hi])
            flat[shift + np.arange(words.start, words.stop)] = self.flat[words]

    def copy(self) -> SramLoads:
        return SramLoads(self.flat.copy(), self.base, self.sizes)

    def dense(self) -> SramImage:
        """The same words as an :class:`SramImage`."""
        image = zeros(self.sizes)
        self.fill(image.flat, image.base)
        return image


FILL_WORDS = 1 << 22  # loaded words :meth:`SramLoads.fill` places at once


def zeros(sizes) -> SramImage:
    """An image of zero words, ``sizes[p]`` (at least one) for PE ``p``."""
    sizes = np.maximum(np.asarray(sizes, np.int64), 1)
    base = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return SramImage(np.zeros(int(base[-1]), np.float32), base)


def sram_image(memory, pes: int) -> SramImage | SramLoads:
    """``memory`` as an image of ``pes`` PEs: an image or a plan's loads as they are, or a
    float32 ``(pes, words)`` array (copied), every PE ``words`` long."""
    if isinstance(memory, SramLoads):
        if memory.pes != pes:
            raise ConfigError(f"memory holds {memory.pes} PEs' SRAM: must cover all {pes} PEs")
        base = np.asarray(memory.base)
        if (len(base) != pes + 1 or base[0] != 0 or (np.diff(base) < 0).any()
                or memory.flat.size != base[-1]):  # fmt: skip
            raise ConfigError(
                f"memory.base must rise from 0 to memory.flat's {memory.flat.size} words, "
                f"{pes + 1} entries"
            )
        if (np.diff(base) > memory.sizes).any() or (memory.sizes < 1).any():
            raise ConfigError("memory.sizes must hold at least one word and each PE's loaded ones")
        return memory
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


def copy_into(image: SramImage | SramLoads, flat: np.ndarray, base: np.ndarray) -> None:
    """Put ``image``'s words into a zeroed ``flat`` laid out by ``base`` (its sizes)."""
    if isinstance(image, SramLoads):
        image.fill(flat, base)
    else:
        flat[:] = image.flat
