"""GEMM placement strategies: a kernel algorithm, where its dimensions go, what it needs.

Each :class:`Strategy` names a registered kernel algorithm (``kernels.registry``) with its
options, says which grids it can use for ``C = A @ B`` (``m x k`` times ``k x n``), and
estimates the SRAM bytes per PE of the largest tile: exactly what the kernel allocates
(resident operand tiles, double-buffered streamed pieces, fp32 partial sums and ``C``), with
ragged tiles rounded up, so the estimate is never below the kernel's own peak.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from fabric.program import WORD_BYTES, words
from kernels.gemm_systolic import chunk_width
from kernels.gemm_weight_stream import chunk_offsets
from wafer.errors import ConfigError
from wafer.spec import WaferSpec


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _weight_stream_words(reduce: str) -> Callable[..., int]:
    def need(m, k, n, p, q, spec, dtype) -> int:
        mj, ki = _ceil(m, q), _ceil(k, p)
        chunks = np.diff(chunk_offsets(n, p))
        width = int(chunks.max())
        owned = n if reduce == "tree" else _ceil(len(chunks), p) * width
        return words(mj * ki, dtype) + mj * owned + 2 * mj * width

    return need


def _summa_words(m, k, n, p, q, spec, dtype) -> int:
    mi, nj, widest = _ceil(m, p), _ceil(n, q), min(_ceil(k, q), _ceil(k, p))
    pieces_a, pieces_b = p // q + 2, q // p + 2  # k-steps in a column's (row's) share
    a = words(mi * _ceil(k, q), dtype) + pieces_a
    b = words(_ceil(k, p) * nj, dtype) + pieces_b
    bufs = (2 * words(mi * widest, dtype) if q > 1 else 0) + (
        2 * words(widest * nj, dtype) if p > 1 else 0
    )
    return a + b + bufs + mi * nj


def _cannon_words(m, k, n, p, q, spec, dtype) -> int:
    mr, kl, nc = _ceil(m, p), _ceil(k, p), _ceil(n, p)
    return 2 * words(mr * kl, dtype) + 2 * words(kl * nc, dtype) + mr * nc


def _systolic_words(m, k, n, p, q, spec, dtype) -> int:
    mi, nj = _ceil(m, p), _ceil(n, q)
    chunk = _ceil(k, _ceil(k, chunk_width(k, mi, spec)))
    return mi * nj + 2 * words(mi * chunk, dtype)


@dataclass(frozen=True)
class Strategy:
    """A kernel algorithm and how a GEMM maps onto its grid.

    ``split`` gives, per grid axis, the dimension cut across it (each needs at least one
    value per PE); ``k_over_grid``: ``k`` is also cut along both axes (SUMMA, Cannon);
    ``mapping`` is reported in the plan.
    """

    algo: str
    words: Callable[..., int]
    split: tuple[str, str]
    mapping: dict[str, str]
    options: dict[str, str] = field(default_factory=dict)
    square: bool = False
    k_over_grid: bool = False

    def usable(self, m: int, k: int, n: int, rows: int, cols: int) -> bool:
        """Whether the kernel can cut the GEMM over ``rows x cols`` PEs."""
        dims = {"m": m, "k": k, "n": n}
        if self.square and rows != cols:
            return False
        k_ok = not self.k_over_grid or k >= max(rows, cols)
        return dims[self.split[0]] >= rows and dims[self.split[1]] >= cols and k_ok

    def sram_bytes(self, m, k, n, rows, cols, spec: WaferSpec, dtype: str) -> int:
        """SRAM bytes of the fullest PE (upper bound of the kernel's allocation)."""
        return WORD_BYTES * self.words(m, k, n, rows, cols, spec, dtype)


_WS_MAP = {"k": "grid rows", "m": "grid columns", "n": "streamed from the west edge in chunks"}
_MN_MAP = {"m": "grid rows", "n": "grid columns"}
STRATEGIES: dict[str, Strategy] = {
    "weight_stream_chain": Strategy(
        "weight_stream", _weight_stream_words("chain"), ("k", "m"), _WS_MAP, {"reduce": "chain"}
    ),
    "weight_stream_tree": Strategy(
        "weight_stream", _weight_stream_words("tree"), ("k", "m"), _WS_MAP, {"reduce": "tree"}
    ),
    "summa": Strategy(
        "summa", _summa_words, ("m", "n"), {**_MN_MAP, "k": "broadcast steps"}, k_over_grid=True
    ),
    "cannon_naive": Strategy(
        "cannon_naive",
        _cannon_words,
        ("m", "n"),
        {**_MN_MAP, "k": "ring shifts"},
        square=True,
        k_over_grid=True,
    ),
    "cannon_interleaved": Strategy(
        "cannon_interleaved",
        _cannon_words,
        ("m", "n"),
        {**_MN_MAP, "k": "ring shifts"},
        square=True,
        k_over_grid=True,
    ),  # fmt: skip
    "systolic": Strategy(
        "systolic", _systolic_words, ("m", "n"), {**_MN_MAP, "k": "streamed in chunks"}
    ),
}


def strategies(names: list[str] | None) -> dict[str, Strategy]:
    """The named strategies (all by default); an unknown name lists the valid ones."""
    if names is None:
        return STRATEGIES
    unknown = [name for name in names if name not in STRATEGIES]
    if unknown or not names:
        raise ConfigError(f"strategies={names!r}: each must be one of: {', '.join(STRATEGIES)}")
    return {name: STRATEGIES[name] for name in names}


def grid_sizes(limit: int) -> list[int]:
    """Candidate sizes of one grid axis: powers of two below ``limit``, and ``limit``."""
    return [2**e for e in range(int(math.log2(limit)) + 1) if 2**e < limit] + [limit]
