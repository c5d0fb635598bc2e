"""Collectives over a row, a column or the whole of a kernel grid, run on the cycle engine.

``collective(op, algo, n_words, grid, spec)`` builds one of :data:`OPS` with one of
:data:`ALGOS` over one of :data:`SCOPES` from the line building blocks of
:mod:`kernels.lines`, runs it and returns a :class:`~kernels.result.KernelResult`:

* ``broadcast``: every PE ends with the root's ``n_words``;
* ``scatter``: the root's ``n_words`` are split into one ragged piece per PE (in row-major
  order of the scope), every PE ends with its piece; ``gather`` is the reverse. A scatter
  may also take ``filter``: the root sends one stream a side of each line, and each PE's
  router forwards it while a counter filter hands the PE its piece (:mod:`fabric.filters`);
* ``reduce``: the root ends with the fp32 sum of every PE's ``n_words``; ``allreduce``: every
  PE does (a reduce, then a broadcast of the sum).

A scope is one or two *levels* of lines: ``row`` is row 0 of the grid, ``column`` column 0,
``grid`` every row at once, then the root's column (broadcast and scatter run the levels in
reverse). The root is logical PE ``(0, 0)``; an allreduce roots at the middle PE for
``chain`` and ``ktree``, which halves their distance, and at ``(0, 0)`` for ``tree``, whose
binomial rounds reach as far from an end with half the colors and no two-sided root.

Algorithms along each line (:mod:`kernels.lines`): ``chain`` (store-and-forward between
neighbours), ``tree`` (binomial rounds; a broadcast is one multicast over the whole scope)
and ``ktree`` (groups of about ``sqrt(len)`` PEs at once, then their leaders). Each level
takes its own colors, so streams of different levels never share a queue, unless the op
would need more colors than the router leaves kernels: then a reduction's upper level takes
its lower level's colors again, in a new switch position of the routers where the two meet
(``Wiring.new_position``; a whole-wafer tree allreduce needs 10 + 1 colors instead of 21).

Data come from ``np.random.default_rng(seed)``; ``dtype="fp16"`` packs two values a word for
the data movements (a reduction adds fp32 words, so it takes ``fp32`` only).
:func:`collective_cycles` is the analytic estimate: the sum of its levels' line estimates.
:data:`COLLECTIVES` holds a family record an op (:mod:`kernels.family`): what the kernels'
registry runs, estimates and refuses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numpy as np
from wafersim.fabric.program import WORD_BYTES, value_bytes
from wafersim.kernels.family import KernelAlgorithm, KernelFamily, Shape, by_name, columns_drawn
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.kernel_plan import KernelPlan, decode, encode, split
from wafersim.kernels.lines import (
    FILTER,
    REDUCE_ALGOS,
    broadcast_colors,
    broadcast_cycles,
    broadcast_line,
    gather_cycles,
    gather_line,
    line_spans,
    multicast,
    reduce_colors,
    reduce_cycles,
    reduce_line,
    scatter_line,
)
from wafersim.kernels.result import KernelResult, kernel_result, max_cycles_for, p2p_cycles
from wafersim.kernels.wiring import palette_size
from wafersim.wafer.dtypes import DTYPE_NAMES, DType
from wafersim.wafer.errors import ConfigError, excerpt
from wafersim.wafer.spec import WaferSpec

ALGOS = REDUCE_ALGOS  # every op's; a scatter may also filter one stream (SCATTER_ALGOS)
SCATTER_ALGOS = (*REDUCE_ALGOS, FILTER)
REDUCING = ("reduce", "allreduce")  # ops that add fp32 words


@dataclass(frozen=True)
class _Level:
    """Lines (mesh PE ids) that run at once, all rooted at position ``root``."""

    lines: list[list[int]]
    root: int


class _Built(NamedTuple):
    """What an op left to read back: ``(pe, addr, n_words)`` regions, the numpy answer
    (the regions' values concatenated, reshaped like it) and the additions it does."""

    reads: list[tuple[int, int, int]]
    expected: np.ndarray
    flops: int


def collective(
    op: str,
    algo: str,
    n_words: int,
    grid: KernelGrid,
    spec: WaferSpec,
    dtype: DType = "fp32",
    scope: str = "grid",
    seed: int = 0,
) -> KernelResult:
    """Run ``op`` (:data:`OPS`) with ``algo`` (:data:`ALGOS`) over ``scope`` (:data:`SCOPES`)
    of ``grid``; ``n_words`` is each PE's vector (broadcast, reduce, allreduce) or the whole
    vector split over the PEs (scatter, gather)."""
    _check(op, algo, scope, n_words, dtype, grid.rows, grid.cols)
    levels = _levels(scope, grid, _root_at(op, algo, grid.rows, grid.cols))
    plan = KernelPlan(grid, spec)
    lines = [(len(level.lines[0]), level.root) for level in levels]
    palette = _Palette(plan, _check_colors(op, algo, scope, lines, spec))
    built = OPS[op].build(plan, levels, n_words, algo, dtype, palette, seed)
    analytic = collective_cycles(op, algo, n_words, grid.rows, grid.cols, spec, dtype, scope)
    sim = plan.run(max_cycles_for(analytic))
    per_word = WORD_BYTES // value_bytes(dtype)
    output = np.concatenate(
        [decode(sim.mem[pe, a : a + n], n * per_word, dtype) for pe, a, n in built.reads]
    )
    rows, cols = _scope_shape(scope, grid.rows, grid.cols)
    return kernel_result(
        kernel=op,
        algo=algo,
        dtype=dtype,
        shape={"n_words": n_words, "rows": rows, "cols": cols},
        plan=plan,
        sim=sim,
        flops=built.flops,
        analytic=analytic,
        output=output.reshape(built.expected.shape),
        expected=built.expected,
    )


def collective_cycles(
    op: str,
    algo: str,
    n_words: int,
    rows: int,
    cols: int,
    spec: WaferSpec,
    dtype: DType = "fp32",
    scope: str = "grid",
) -> int:
    """Analytic cycles of :func:`collective` on a defect-free ``rows x cols`` grid: the sum
    of its levels' line estimates (:mod:`kernels.lines`), the levels running one after the
    other; a tree broadcast is one multicast, ``p2p`` over the farthest PE's hops."""
    _check(op, algo, scope, n_words, dtype, rows, cols)
    lines = _scope_lines(op, algo, scope, rows, cols)
    _check_colors(op, algo, scope, lines, spec)
    return OPS[op].cycles(algo, lines, n_words, spec)


def _scope_lines(op: str, algo: str, scope: str, rows: int, cols: int) -> list[tuple[int, int]]:
    """The scope's levels as (length, root), bottom first, without one-PE lines."""
    at = _root_at(op, algo, rows, cols)
    dims = {"row": [(cols, at[1])], "column": [(rows, at[0])]}
    dims["grid"] = dims["row"] + dims["column"]
    return [(n, root) for n, root in dims[scope] if n > 1]


def collective_words(op: str, n_words: int) -> int:
    """SRAM words of the fullest PE: its vector (broadcast, reduce, allreduce) or, at the
    root of a scatter or gather, the whole vector."""
    if op not in OPS:
        raise ConfigError(f"op={excerpt(op)} is not one of: {', '.join(OPS)}")
    return n_words


def _check_colors(op: str, algo: str, scope: str, lines, spec: WaferSpec) -> bool:
    """ConfigError, before any route is built, when ``op`` needs more colors than the
    router leaves kernels, so every tier refuses it alike; returns whether a reduction's
    upper level reuses the lower one's colors (:func:`reuses_colors`)."""
    available = palette_size(spec)
    reuse = reuses_colors(op, algo, lines, available)
    needed = colors_needed(op, algo, lines, reuse)
    if needed > available:
        raise ConfigError(
            f"{op} {algo} over {scope} needs {needed} colors: "
            f"router.colors={spec.router.colors} leaves {available} for kernels; raise "
            "router.colors or pick an algo or scope that needs fewer"
        )
    return reuse


# ---- validation, scopes and roots


def _check(op, algo, scope, n_words, dtype, rows, cols) -> None:
    algos = algos_of(op) if op in OPS else ALGOS
    for name, value, valid in (("op", op, OPS), ("algo", algo, algos), ("scope", scope, SCOPES)):
        if value not in valid:
            raise ConfigError(f"{name}={excerpt(value)} is not one of: {', '.join(valid)}")
    if not isinstance(n_words, int) or n_words < 1:
        raise ConfigError(f"n_words={excerpt(n_words)} must be an integer >= 1")
    if value_bytes(dtype) != WORD_BYTES and op in REDUCING:
        raise ConfigError(f"dtype={excerpt(dtype)}: {_adds_fp32(op)}")
    shape = _scope_shape(scope, rows, cols)
    if shape[0] * shape[1] < 2:
        raise ConfigError(
            f"scope={scope!r} of a {rows}x{cols} grid has {shape[0] * shape[1]} PE: "
            "a collective needs at least 2"
        )


def algos_of(op: str) -> tuple[str, ...]:
    """The algorithms ``op`` runs with: every op the line algorithms, a scatter also
    :data:`~kernels.lines.FILTER` (a filter hands out parts of a stream; it cannot merge)."""
    return SCATTER_ALGOS if op == "scatter" else ALGOS


def _adds_fp32(op: str) -> str:
    """Why a reduction refuses a dtype of two values a word."""
    return f"{op} adds fp32 words, so dtype must be 'fp32'"


def _scope_shape(scope: str, rows: int, cols: int) -> tuple[int, int]:
    return {"row": (1, cols), "column": (rows, 1), "grid": (rows, cols)}[scope]


def _root_at(op: str, algo: str, rows: int, cols: int) -> tuple[int, int]:
    """Logical (row, column) of the root; see the module docstring."""
    if op == "allreduce" and algo != "tree":
        return (rows - 1) // 2, (cols - 1) // 2
    return 0, 0


def _row_scope(grid: KernelGrid, at: tuple[int, int]) -> list[_Level]:
    return [_Level([_ids(grid.pe[0])], at[1])]


def _column_scope(grid: KernelGrid, at: tuple[int, int]) -> list[_Level]:
    return [_Level([_ids(grid.pe[:, 0])], at[0])]


def _grid_scope(grid: KernelGrid, at: tuple[int, int]) -> list[_Level]:
    rows = _Level([_ids(row) for row in grid.pe], at[1])
    return [rows, _Level([_ids(grid.pe[:, at[1]])], at[0])]


SCOPES: dict[str, Callable[[KernelGrid, tuple[int, int]], list[_Level]]] = {
    "row": _row_scope,
    "column": _column_scope,
    "grid": _grid_scope,
}


def _levels(scope: str, grid: KernelGrid, at: tuple[int, int]) -> list[_Level]:
    """The scope's levels, bottom first, without levels of one-PE lines."""
    return [level for level in SCOPES[scope](grid, at) if len(level.lines[0]) > 1]


def _ids(pes: np.ndarray) -> list[int]:
    return [int(p) for p in pes]


def _members(levels: list[_Level]) -> list[int]:
    """Every PE of the scope, in row-major order (the bottom level covers them all)."""
    return [pe for line in levels[0].lines for pe in line]


def _root_pe(levels: list[_Level]) -> int:
    return levels[-1].lines[0][levels[-1].root]


class _Palette:
    """Hands out the kernel colors in order; running out is an error naming the limit.
    ``reuse``: the op needs more colors than the router leaves kernels, so a reduction's
    upper level takes its lower level's colors again (:func:`reuses_colors`)."""

    def __init__(self, plan: KernelPlan, reuse: bool) -> None:
        self.colors, self.used = list(plan.wiring.palette), 0
        self.router_colors = plan.spec.router.colors
        self.reuse = reuse

    def take(self, count: int) -> list[int]:
        if self.used + count > len(self.colors):
            raise ConfigError(
                f"collective needs more than {len(self.colors)} colors: router.colors="
                f"{self.router_colors} leaves colors 0..{len(self.colors) - 1} for kernels; "
                "raise router.colors or pick an algo or scope that needs fewer"
            )
        self.used += count
        return self.colors[self.used - count : self.used]


def _vectors(plan: KernelPlan, pes: list[int], n_words: int, what: str) -> dict[int, int]:
    return {pe: plan.alloc(pe, n_words, what) for pe in pes}


def _random(seed: int, shape, dtype: DType) -> np.ndarray:
    """Random values for ``shape`` words of ``dtype``, as stored (fp16: rounded)."""
    *lead, n_words = shape
    count = n_words * (WORD_BYTES // value_bytes(dtype))
    values = np.random.default_rng(seed).standard_normal((*lead, count)).astype(np.float32)
    return decode(encode(values, dtype), values.size, dtype).reshape(values.shape)


# ---- the ops: each places its data, adds its streams and says what to read back


def _broadcast(plan, levels, n_words, algo, dtype, palette, seed) -> _Built:
    pes, root = _members(levels), _root_pe(levels)
    vector = _random(seed, (n_words,), dtype)
    addrs = _vectors(plan, pes, n_words, "broadcast vector")
    plan.load(root, addrs[root], encode(vector, dtype))
    _broadcast_levels(plan, levels, addrs, n_words, algo, palette)
    return _Built([(pe, addrs[pe], n_words) for pe in pes], np.tile(vector, (len(pes), 1)), 0)


def _reduce(plan, levels, n_words, algo, dtype, palette, seed) -> _Built:
    pes, root = _members(levels), _root_pe(levels)
    addrs, inputs = _reduce_levels(plan, levels, n_words, algo, palette, seed)
    total = inputs.astype(np.float64).sum(axis=0)
    return _Built([(root, addrs[root], n_words)], total, n_words * (len(pes) - 1))


def _allreduce(plan, levels, n_words, algo, dtype, palette, seed) -> _Built:
    pes = _members(levels)
    addrs, inputs = _reduce_levels(plan, levels, n_words, algo, palette, seed)
    _broadcast_levels(plan, levels, addrs, n_words, algo, palette)
    total = np.tile(inputs.astype(np.float64).sum(axis=0), (len(pes), 1))
    return _Built([(pe, addrs[pe], n_words) for pe in pes], total, n_words * (len(pes) - 1))


def _scatter(plan, levels, n_words, algo, dtype, palette, seed) -> _Built:
    pes, root = _members(levels), _root_pe(levels)
    offsets = split(n_words, len(pes), "n_words")
    vector = _random(seed, (n_words,), dtype)
    bases = _piece_buffers(plan, levels, offsets, algo)
    plan.load(root, bases[root], encode(vector, dtype))
    _move_levels(plan, levels, offsets, bases, algo, palette, scatter_line, True)
    sizes = np.diff(offsets)
    reads = [(pe, bases[pe] + int(offsets[t]), int(sizes[t])) for t, pe in enumerate(pes)]
    return _Built(reads, vector, 0)


def _gather(plan, levels, n_words, algo, dtype, palette, seed) -> _Built:
    pes, root = _members(levels), _root_pe(levels)
    offsets = split(n_words, len(pes), "n_words")
    vector = _random(seed, (n_words,), dtype)
    words = encode(vector, dtype)
    bases = _piece_buffers(plan, levels, offsets, algo)
    for t, pe in enumerate(pes):
        plan.load(pe, bases[pe] + int(offsets[t]), words[offsets[t] : offsets[t + 1]])
    _move_levels(plan, levels, offsets, bases, algo, palette, gather_line, False)
    return _Built([(root, bases[root], n_words)], vector, 0)


# ---- levels: each runs its lines at once on colors of its own


def _reduce_levels(plan, levels, n_words, algo, palette, seed):
    """Place random fp32 inputs and reduce them level by level into the root: returns the
    vectors' addresses and the inputs (PEs, n_words)."""
    pes = _members(levels)
    inputs = _random(seed, (len(pes), n_words), "fp32")
    addrs = _vectors(plan, pes, n_words, "reduce vector")
    for pe, vector in zip(pes, inputs, strict=True):
        plan.load(pe, addrs[pe], vector)
    first = None
    for depth, level in enumerate(levels):
        count = reduce_colors(algo, len(level.lines[0]), level.root)
        if depth == 0 or not palette.reuse:
            colors = palette.take(count)
            first = first or colors
            _reduce_level(plan, level, addrs, n_words, algo, colors, depth)
            continue
        colors = first[:count] + palette.take(max(0, count - len(first)))
        members = [pe for line in level.lines for pe in line]
        switch = lambda pes=members: plan.wiring.switch_ops(plan.prog, pes, 0)  # noqa: E731
        with plan.wiring.new_position(members):  # the first level's colors again
            _reduce_level(plan, level, addrs, n_words, algo, colors, depth, switch)
    return addrs, inputs


def _reduce_level(plan, level, addrs, n_words, algo, colors, depth, prepare=None) -> None:
    for k, line in enumerate(level.lines):
        where = [addrs[pe] for pe in line]
        reduce_line(plan, line, level.root, where, n_words, algo, colors, ("reduce", depth, k),
                    prepare=prepare if k == 0 else None)  # fmt: skip


def _broadcast_levels(plan, levels, addrs, n_words, algo, palette) -> None:
    """Copy the root's vector at ``addrs`` to every PE: top level first, or (tree) one
    multicast to the whole scope, nearest PEs first so its paths are shortest."""
    root = _root_pe(levels)
    if algo == "tree":
        others = _nearest_first(plan.grid.mesh.width, root, _members(levels))
        color = palette.take(1)[0]
        multicast(plan, root, others, addrs, addrs[root], n_words, color, "broadcast")
        return
    for depth, level in reversed(list(enumerate(levels))):
        colors = palette.take(broadcast_colors(algo, len(level.lines[0]), level.root))
        for k, line in enumerate(level.lines):
            where = [addrs[pe] for pe in line]
            owner = ("broadcast", depth, k)
            broadcast_line(plan, line, level.root, where, n_words, algo, colors, owner)


def _nearest_first(width: int, root: int, pes: list[int]) -> list[int]:
    """``pes`` but the root, by mesh distance from it."""
    hops = lambda pe: abs(pe % width - root % width) + abs(pe // width - root // width)  # noqa: E731
    return sorted((pe for pe in pes if pe != root), key=hops)


def _move_levels(plan, levels, offsets, bases, algo, palette, line_op, top_first) -> None:
    """Gather (levels bottom first) or scatter (``top_first``) the pieces at ``offsets``."""
    steps = list(enumerate(zip(levels, _level_offsets(levels, offsets), strict=True)))
    for depth, (level, line_offsets) in steps[::-1] if top_first else steps:
        colors = palette.take(reduce_colors(algo, len(level.lines[0]), level.root))
        for k, (line, ofs) in enumerate(zip(level.lines, line_offsets, strict=True)):
            where = [bases[pe] for pe in line]
            line_op(plan, line, level.root, where, ofs, algo, colors, (line_op.__name__, depth, k))


def _level_offsets(levels, offsets) -> list[list[list[int]]]:
    """Per level and line: the word offsets (len(line)+1,) of what each position holds of
    the whole: single pieces on the bottom lines, the bottom lines' blocks on the top one."""
    starts = np.cumsum([0] + [len(line) for line in levels[0].lines])
    bottom = [
        [int(w) for w in offsets[a : b + 1]] for a, b in zip(starts, starts[1:], strict=False)
    ]
    return [bottom] + [[[int(offsets[s]) for s in starts]] for _top in levels[1:]]


def _piece_buffers(plan, levels, offsets, algo) -> dict[int, int]:
    """Allocate every PE's span (:func:`~kernels.lines.line_spans`) of words, top level
    first, so a line root's bottom span (its line's block) falls inside its top one; returns
    each PE's base: word ``w`` of the whole lives at ``base + w``."""
    bases = {}
    pairs = zip(levels, _level_offsets(levels, offsets), strict=True)
    for level, line_offsets in reversed(list(pairs)):
        spans = line_spans(algo, len(level.lines[0]), level.root)
        for line, ofs in zip(level.lines, line_offsets, strict=True):
            for pe, (lo, hi) in zip(line, spans, strict=True):
                if pe not in bases:
                    bases[pe] = plan.alloc(pe, ofs[hi] - ofs[lo], "pieces") - ofs[lo]
    return bases


# ---- analytic estimates: ``lines`` lists each level's (length, root), bottom first


def _broadcast_cycles(algo, lines, n_words, spec) -> int:
    if algo == "tree":
        return p2p_cycles(spec, sum(max(root, n - 1 - root) for n, root in lines), n_words)
    return sum(broadcast_cycles(algo, n, root, n_words, spec) for n, root in lines)


def _reduce_cycles(algo, lines, n_words, spec, op: str = "reduce") -> int:
    """The levels one after the other, and the switches where ``op`` reuses colors."""
    total = sum(reduce_cycles(algo, n, root, n_words, spec) for n, root in lines)
    if reuses_colors(op, algo, lines, palette_size(spec)):
        total += _switches(spec)
    return total


def _switches(spec) -> int:
    """What reused colors add: the upper level's first stream waits for its PEs' last
    switch, one op (a cycle and the op start-up), and for a cycle in which the router
    routes under its new position; a PE's other switches overlap its senders' own (on
    8 x 8 to 32 x 32 the engine adds 4 cycles whatever the colors reused)."""
    return 2 + spec.pe.op_startup_cycles


def _allreduce_cycles(algo, lines, n_words, spec) -> int:
    reduce = _reduce_cycles(algo, lines, n_words, spec, op="allreduce")
    return reduce + _broadcast_cycles(algo, lines, n_words, spec)


def colors_needed(op: str, algo: str, lines, reuse: bool = False) -> int:
    """Colors ``op`` takes over levels ``lines`` ((length, root), bottom first), each level
    on colors of its own, or (``reuse``) a reduction's upper level on its lower one's."""
    counts = [reduce_colors(algo, n, root) for n, root in lines]
    reduce = max(counts) if reuse and op in REDUCING else sum(counts)
    if op not in ("broadcast", "allreduce"):
        return reduce
    broadcast = 1 if algo == "tree" else sum(broadcast_colors(algo, n, r) for n, r in lines)
    return {"broadcast": broadcast, "allreduce": reduce + broadcast}[op]


def reuses_colors(op: str, algo: str, lines, available: int) -> bool:
    """Whether a reduction runs short of the ``available`` kernel colors with a color set
    a level, so its upper level reuses the lower one's (``Wiring.new_position``): only then,
    since each reused color costs the upper level's PEs a router switch."""
    return op in REDUCING and len(lines) > 1 and colors_needed(op, algo, lines) > available


def _gather_cycles(algo, lines, n_words, spec) -> int:
    """Pieces of ``n / PEs`` words; a top line's pieces are the bottom lines' blocks."""
    piece, total = n_words / np.prod([n for n, _ in lines]), 0
    for n, root in lines:
        total += gather_cycles(algo, n, root, piece, spec)
        piece *= n
    return total


class _Op(NamedTuple):
    build: Callable[..., _Built]
    cycles: Callable[..., int]


OPS: dict[str, _Op] = {
    "broadcast": _Op(_broadcast, _broadcast_cycles),
    "scatter": _Op(_scatter, _gather_cycles),
    "gather": _Op(_gather, _gather_cycles),
    "reduce": _Op(_reduce, _reduce_cycles),
    "allreduce": _Op(_allreduce, _allreduce_cycles),
}


# ---- the records: a family an op, what the kernels' registry runs, estimates and refuses


def run_collective(op: str, algo: str, shape: Shape, grid: KernelGrid, spec: WaferSpec,
                   dtype: DType, seed: int, scope: str = "grid") -> KernelResult:  # fmt: skip
    """:func:`collective` of ``shape["n"]`` words with data drawn from ``seed``."""
    return collective(op, algo, shape["n"], grid, spec, dtype, scope, seed)


def _shape_cycles(op: str, algo: str, shape: Shape, rows: int, cols: int, spec: WaferSpec,
                  dtype: DType, scope: str = "grid") -> int:  # fmt: skip
    return collective_cycles(op, algo, shape["n"], rows, cols, spec, dtype, scope)


def _shape_words(op: str, algo: str, shape: Shape, rows: int, cols: int, spec: WaferSpec,
                 dtype: DType, scope: str = "grid") -> int:  # fmt: skip
    return collective_words(op, shape["n"])


def collective_colors(op: str, algo: str, shape: Shape, rows: int, cols: int, spec: WaferSpec,
                      scope: str = "grid") -> int:  # fmt: skip
    """Colors :func:`collective` takes from the palette on a clean ``rows x cols`` grid
    (:func:`colors_needed`, a reduction's upper level on its lower one's where the router
    leaves too few): more than the router leaves kernels, and it is refused."""
    _check(op, algo, scope, shape["n"], "fp32", rows, cols)
    lines = _scope_lines(op, algo, scope, rows, cols)
    return colors_needed(op, algo, lines, reuses_colors(op, algo, lines, palette_size(spec)))


def _family(op: str) -> KernelFamily:
    """The family of ``op``: one record per algorithm (:data:`ALGOS`)."""
    reducing = op in REDUCING
    return KernelFamily(
        name=op,
        algorithms=by_name(
            KernelAlgorithm(
                name=algo,
                build=partial(run_collective, op),
                analytic_cycles=partial(_shape_cycles, op),
                sram_words=partial(_shape_words, op),
                dtypes=("fp32",) if reducing else DTYPE_NAMES,
                dtype_refusal=_adds_fp32(op) if reducing else "",
                option_names=("scope",),
                colors=partial(collective_colors, op),
            )
            for algo in algos_of(op)
        ),
        shape_keys=("n",),
        drawn_values=columns_drawn,  # a vector a PE: a scatter's or gather's whole is less
    )


COLLECTIVES: tuple[KernelFamily, ...] = tuple(_family(op) for op in OPS)
