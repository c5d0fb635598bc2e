"""Pruned weights as weight streaming sends them: only the nonzero values, each with its index.

Unstructured weight sparsity on the documented system streams only the nonzero weights from
MemoryX, and the dataflow PEs compute only on what arrives, skipping the zeros' multiply-adds
(Lie, "Cerebras architecture deep dive", Hot Chips 34, 2022, paraphrased; the exact wire
format is not published). The wafer's fabric moves 32-bit wavelets, so each value travels
with a 16-bit index into its block of ``k_i x w`` weights (``e = row + k_i * col``, column
major): an fp16 or bf16 value and its index share one wavelet; an fp32 value takes a whole
wavelet, so its index shares a word with the next value's, one index word before each pair
(an assumption: the documents read give the fp16 layout only). A block is sent compressed
only where that is shorter than sending it dense (below density 2/3 in fp32, 1/2 in 16 bits)
and its values fit the 16-bit index; a block without a nonzero is not sent at all.
"""

from __future__ import annotations

from numbers import Real
from typing import NamedTuple

import numpy as np
from wafersim.fabric.program import (
    MAX_SPARSE_INDEX,
    WORD_BYTES,
    index_wavelets_per_value,
    pack_half,
    spmacs_wavelets,
    unpack_half,
    value_bytes,
    words,
)
from wafersim.kernels.kernel_plan import encode
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.dtypes import HALF_DTYPES, DType
from wafersim.wafer.errors import ConfigError

DENSE, SPARSE, EMPTY = "dense", "sparse", "empty"


class Block(NamedTuple):
    """One block of ``B`` as a port streams it: ``mode`` (dense, sparse or empty), its
    words, its nonzero values, the values its PEs multiply (all of a dense block's) and,
    for fp32 sparse, which words are index words."""

    mode: str
    data: np.ndarray  # float32 words
    nonzeros: int
    multiplied: int
    index_words: np.ndarray  # bool per word (all False unless fp32 sparse)


def check_density(density, name: str = "density") -> float:
    """``density`` as a float; ConfigError (naming it ``name``) unless it is a number in
    (0, 1]."""
    ok = isinstance(density, Real) and not isinstance(density, bool)
    if not (ok and 0 < density <= 1):
        raise ConfigError(f"{name}={density!r} must be a number in (0, 1]")
    return float(density)


def keep_largest(magnitude: np.ndarray, density: float) -> np.ndarray:
    """bool mask (the shape of ``magnitude``): the ``round(density * size)`` largest (at
    least one; ties in index order), as magnitude pruning keeps them."""
    keep = max(1, round(check_density(density) * magnitude.size))
    order = np.argsort(-magnitude, axis=None, kind="stable")[:keep]
    mask = np.zeros(magnitude.size, bool)
    mask[order] = True
    return mask.reshape(magnitude.shape)


def prune_to_density(b: np.ndarray, density: float) -> np.ndarray:
    """``b`` with all but its largest-magnitude ``density`` share set to zero."""
    if check_density(density) == 1.0:
        return b
    return np.where(keep_largest(np.abs(b), density), b, np.float32(0.0)).astype(np.float32)


def stored_nonzero(values: np.ndarray, dtype: DType) -> np.ndarray:
    """bool per value: nonzero once stored as ``dtype`` (fp16 flushes tiny values to zero;
    an overflow to inf is nonzero, as the kernel would send it)."""
    stored = np.asarray(values, np.float32)
    if dtype in HALF_DTYPES:
        with np.errstate(over="ignore"):
            packed = pack_half(stored, dtype)
        stored = unpack_half(packed, stored.size, dtype).reshape(stored.shape)
    return stored != 0


def encode_block(block: np.ndarray, dtype: DType) -> Block:
    """Block ``B[K_i, chunk]`` (``k_i x w``) as its port sends it (see the module text)."""
    flat = np.asarray(block, np.float32).T.reshape(-1)  # column major: e = row + k_i * col
    nonzero = stored_nonzero(flat, dtype)
    count = int(nonzero.sum())
    if count == 0:
        return Block(EMPTY, np.zeros(0, np.float32), 0, 0, np.zeros(0, bool))
    dense = words(flat.size, dtype)
    if count == flat.size or flat.size > MAX_SPARSE_INDEX or spmacs_wavelets(count, dtype) >= dense:
        return Block(DENSE, encode(flat, dtype), count, flat.size, np.zeros(dense, bool))
    data, index_words = encode_sparse(flat[nonzero], np.flatnonzero(nonzero), dtype)
    return Block(SPARSE, data, count, count, index_words)


def encode_row(row: np.ndarray, chunks: np.ndarray, dtype: DType) -> list[Block]:
    """:func:`encode_block` of each block ``row[:, c0:c1]`` of a grid row's weights
    (``chunks``: the column offsets), the same blocks; a row without a zero (as stored) is
    encoded at once, its blocks views of one array (a whole wafer's GPT-3 layer is 2 M
    blocks, one call each took minutes)."""
    row = np.asarray(row, np.float32)
    flat = row.T.reshape(-1)  # each block column major, one after another
    spans = zip(chunks[:-1].tolist(), chunks[1:].tolist(), strict=True)
    if not stored_nonzero(flat, dtype).all():
        return [encode_block(row[:, c0:c1], dtype) for c0, c1 in spans]
    values = np.diff(chunks) * row.shape[0]
    per_word = WORD_BYTES // value_bytes(dtype)
    ends = np.cumsum(values)
    if per_word == 2:  # 16-bit pairs: a block of an odd count ends with a zero half
        odd = np.flatnonzero(values % 2)
        bits = pack_half(flat, dtype).view(np.uint16)[: flat.size]
        flat = np.insert(bits, ends[odd], np.uint16(0)).view(np.float32)
    size = words(values, dtype)
    offsets = np.concatenate([[0], np.cumsum(size)])
    starts, stops = offsets[:-1].tolist(), offsets[1:].tolist()
    return [
        Block(DENSE, flat[a:b], n, n, np.zeros(b - a, bool))
        for a, b, n in zip(starts, stops, values.tolist(), strict=True)
    ]


def encode_sparse(values: np.ndarray, index: np.ndarray, dtype: DType):
    """(words, index-word mask) of ``values`` at flat ``index`` (each < 2**16): fp32 as
    groups ``[index word, value, value]``, fp16/bf16 as ``value | index << 16``."""
    index = np.asarray(index, np.uint32)
    if dtype in HALF_DTYPES:
        bits = pack_half(values, dtype).view(np.uint16)[: len(values)].astype(np.uint32)
        return (bits | (index << 16)).view(np.float32), np.zeros(len(values), bool)
    n = len(values)
    pairs = ceil_div(n, 2)
    idx, vals = np.zeros(2 * pairs, np.uint32), np.zeros(2 * pairs, np.float32)
    idx[:n], vals[:n] = index, values
    data = np.empty((pairs, 3), np.uint32)
    data[:, 0] = idx[0::2] | (idx[1::2] << 16)
    data[:, 1:] = vals.view(np.uint32).reshape(pairs, 2)
    size = n + pairs  # the last group of an odd count has one value
    is_index = np.zeros((pairs, 3), bool)
    is_index[:, 0] = True
    return data.reshape(-1)[:size].view(np.float32), is_index.reshape(-1)[:size]


def stream_fraction(density: float, dtype: DType) -> float:
    """Expected share of the dense stream's words at value ``density`` (indices included),
    blocks sent compressed where shorter: ``min(1, 1.5 d)`` in fp32, ``min(1, 2 d)`` in 16
    bits (large blocks; the index words of odd counts left out)."""
    wavelets = 1 + index_wavelets_per_value(dtype)  # a value's, compressed
    dense = value_bytes(dtype) / WORD_BYTES  # a value's words, dense
    return min(1.0, wavelets / dense * check_density(density))
