"""GEMM algorithm records: every registered record is complete and consistent, and a new
algorithm (a toy "row broadcast" GEMM written here) is one record and one ``register`` call
away from running on the engine and being placed by the compiler."""

from __future__ import annotations

import collections.abc
import dataclasses
import importlib.util
import itertools
import types
import typing
from pathlib import Path

import numpy as np
import pytest
from wafersim.compiler.model_file import load_model
from wafersim.compiler.passes import Gemm
from wafersim.compiler.placement import Target, place_gemm
from wafersim.compiler.plan import CompileOptions, compile_plan, working_grid
from wafersim.compiler.plan_records import GemmPlacement
from wafersim.compiler.single_gemm import place_single_gemm, run_placed_gemm
from wafersim.compiler.strategies import strategies
from wafersim.kernels import algorithm
from wafersim.kernels.algorithm import (
    DIMS,
    GemmAlgorithm,
    Variant,
)
from wafersim.kernels.fast_tier import REDUCED_SIDE, fast_cycles
from wafersim.kernels.gemm_algorithms import GEMM_ALGORITHMS, gemm_algorithm, register, unregister
from wafersim.kernels.gemm_shape import GemmShape
from wafersim.kernels.gemm_summa import SUMMA
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.registry import KERNELS, run_kernel
from wafersim.wafer.errors import ConfigError

ZOO = "examples/models"

# The toy algorithm lives in one file of its own, as a user's would (docs/guide.md).
ROW_BROADCAST_FILE = Path(__file__).resolve().parents[1] / "examples/algorithms/row_broadcast.py"
_loader = importlib.util.spec_from_file_location("row_broadcast", ROW_BROADCAST_FILE)
row_broadcast = importlib.util.module_from_spec(_loader)
_loader.loader.exec_module(row_broadcast)
ROW_BROADCAST = row_broadcast.ROW_BROADCAST
row_broadcast_cycles = row_broadcast.row_broadcast_cycles


@pytest.fixture
def registered():
    """``register`` for one test: what it adds is removed after it, the registry restored."""
    before, added = list(GEMM_ALGORITHMS), []

    def add(record: GemmAlgorithm) -> GemmAlgorithm:
        added.append(register(record).name)
        return record

    yield add
    for name in added:
        unregister(name)
    assert list(GEMM_ALGORITHMS) == before


@pytest.fixture
def toy(registered):
    """The toy algorithm, registered for one test."""
    return registered(ROW_BROADCAST)


# ---- completeness ----

RECORDS = {**GEMM_ALGORITHMS, ROW_BROADCAST.name: ROW_BROADCAST}  # registered ones, and the toy


def conforms(value, hint) -> bool:
    """Whether ``value`` has the declared type ``hint`` (callables: callable)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is types.UnionType and type(None) in args:  # optional: None or the other
        other = next(arg for arg in args if arg is not type(None))
        return value is None or conforms(value, other)
    if origin is collections.abc.Callable:
        return callable(value)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return len(value) > 0 and all(conforms(v, args[0]) for v in value)
        return len(value) == len(args) and all(map(conforms, value, args))
    if origin is collections.abc.Mapping:
        return isinstance(value, collections.abc.Mapping)
    if hint is bool:
        return isinstance(value, bool)
    if dataclasses.is_dataclass(hint):
        return isinstance(value, hint) and not missing_fields(value)
    return isinstance(value, hint) and (value != "" if hint is str else True)


def missing_fields(record) -> list[str]:
    """The fields of a record (or sub-record) not set as declared."""
    hints = typing.get_type_hints(type(record))
    return [f.name for f in dataclasses.fields(record)
            if not conforms(getattr(record, f.name), hints[f.name])]  # fmt: skip


def test_an_incomplete_record_is_caught():
    """The completeness check names a field left out or of the wrong type."""
    assert missing_fields(dataclasses.replace(SUMMA, colors=None)) == ["colors"]
    assert missing_fields(dataclasses.replace(SUMMA, grid_dims=("m",))) == ["grid_dims"]
    assert missing_fields(dataclasses.replace(SUMMA, strategies=())) == ["strategies"]
    assert missing_fields(dataclasses.replace(SUMMA, zero_skipping=3)) == ["zero_skipping"]
    sampling = dataclasses.replace(SUMMA.fast_tier, halves_grid=None)
    assert missing_fields(dataclasses.replace(SUMMA, fast_tier=sampling)) == ["fast_tier"]


@pytest.mark.parametrize("name", list(RECORDS))
def test_every_record_is_complete(name):
    """Every field of a record (each registered one, and the toy's) is set as declared;
    its grid cuts two distinct dimensions, its mapping names all three, its strategy names
    are unique."""
    record = RECORDS[name]
    assert missing_fields(record) == []
    assert record.name == name
    assert len(set(record.grid_dims)) == 2
    assert set(record.grid_dims) < set(DIMS)
    assert set(record.mapping) == set(DIMS)
    names = [variant.strategy for variant in record.strategies]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name", list(RECORDS))
def test_colors_and_routes_name_the_same_families(name):
    """The color rule and the route rule of a record list the same families of routes."""
    record = RECORDS[name]
    for variant, (rows, cols) in itertools.product(record.strategies, [(1, 1), (3, 3), (8, 8)]):
        options = dict(variant.options)
        colors = record.colors(rows, cols, 64, options)
        assert set(colors) == set(record.routes(rows, cols, options)), (rows, cols)
        assert all(isinstance(c, int) and c >= 0 for family in colors.values() for c in family)


@pytest.mark.parametrize("name", list(RECORDS))
def test_fast_tier_sampling_is_consistent(name, tiny):
    """The two reduced runs of a 512^3 GEMM on 64 x 64 PEs run through fewer units than the
    full one, the second more than the first; the third dimension only shrinks."""
    record, shape, full = RECORDS[name], GemmShape(512, 512, 512), 64
    sampling, side = record.fast_tier, REDUCED_SIDE
    units = []
    for step in (1, 2):
        p = side // 2 if sampling.halves_grid and step == 1 else side
        length = sampling.reduced_length(shape, full, full, p, p, step, tiny)
        assert 1 <= length <= shape.size(record.third_dim)
        cut = {dim: 512 // full * p for dim in record.grid_dims}
        small = shape.with_sizes({**cut, record.third_dim: length})
        units.append(sampling.units(small, p, p))
    assert units[0] < units[1] <= sampling.units(shape, full, full)


# ---- a new algorithm: one record, one register call ----


def test_register_refuses_a_taken_name_and_unregister_an_unknown_one(toy):
    """A name registered twice, or a strategy name taken, is an error; so is removing an
    unknown name."""
    with pytest.raises(ConfigError, match="already registered"):
        register(toy)
    with pytest.raises(ConfigError, match="already registered"):
        register(dataclasses.replace(SUMMA, name="summa2"))
    with pytest.raises(ConfigError, match="algo='strassen' is not one of"):
        unregister("strassen")


def test_a_registered_algorithm_runs_on_the_engine(toy, tiny):
    """The toy GEMM, registered, runs through the kernels' registry and equals numpy."""
    assert KERNELS["gemm"]["row_broadcast"] is toy
    rng = np.random.default_rng(7)
    a = rng.standard_normal((37, 29)).astype(np.float32)
    b = rng.standard_normal((29, 23)).astype(np.float32)
    for rows, cols in [(1, 1), (3, 4), (4, 3)]:
        result = gemm_algorithm("row_broadcast").apply(a, b, kernel_grid(rows, cols), tiny, "fp32")
        np.testing.assert_allclose(result.output, a @ b, rtol=1e-5, atol=1e-5)
        assert result.sram_peak_bytes <= 4 * toy.sram_words(37, 29, 23, rows, cols, tiny, "fp32")
        assert 0.5 < result.analytic_cycles / result.cycles < 1.5
    seeded = run_kernel("gemm", "row_broadcast", {"m": 8, "k": 8, "n": 8}, kernel_grid(2, 2), tiny)
    assert seeded.max_abs_error < 1e-5


def test_the_fast_tier_samples_a_registered_algorithm(toy, tiny):
    """From 4 x 4 runs, the fast tier estimates the toy's cycles on 8 x 8 within 10 %."""
    shape = {"m": 64, "k": 96, "n": 32}
    engine = run_kernel("gemm", "row_broadcast", shape, kernel_grid(8, 8), tiny).cycles
    fast = fast_cycles("row_broadcast", shape, 8, 8, tiny, reduced_side=4)
    assert [run["rows_cols"] for run in fast.reduced] == [[4, 4], [4, 4]]
    assert fast.cycles == pytest.approx(engine, rel=0.10)


def test_the_compiler_places_a_registered_algorithm_by_its_cost(toy, tiny):
    """The placement search takes the toy's strategy, prices it by its analytic cycles and
    SRAM words, and the placement runs where placed and equals numpy."""
    assert "row_broadcast" in strategies(None)
    spec = tiny.replace({"logical_width_pes": 8, "logical_height_pes": 8})
    placed, working = place_single_gemm({"m": 64, "k": 48, "n": 40}, spec, "fp32",
                                        names=["row_broadcast"])  # fmt: skip
    rows, cols = placed.rows_cols
    assert placed.algorithm == "row_broadcast"
    assert placed.kernel_cycles == toy.cycles({"m": 64, "k": 48, "n": 40}, rows, cols, spec,
                                                 "fp32")  # fmt: skip
    assert placed.sram_bytes_per_pe == 4 * toy.sram_words(64, 48, 40, rows, cols, spec, "fp32")
    result = run_placed_gemm(placed, working, spec, "fp32", seed=2)
    assert result.max_abs_error < 1e-4


def test_the_search_weighs_a_registered_algorithm_against_the_others(toy, registered, tiny):
    """Over every strategy the search finds the cheapest placement of any one alone; the
    toy loses to the others at 64 x 8 x 64, and a copy of it whose cost is a tenth wins."""
    spec = tiny.replace({"logical_width_pes": 8, "logical_height_pes": 8})
    target, work = Target(working_grid(spec), spec, "fp32"), Gemm(64, 8, 64, 1, 0)

    def search() -> tuple[str, dict[str, int]]:
        everyone = strategies(None)
        alone = {name: place_gemm("gemm", work, target, {name: strategy}).cycles
                 for name, strategy in everyone.items()}  # fmt: skip
        best = place_gemm("gemm", work, target, everyone)
        assert best.cycles == min(alone.values())
        return best.strategy, alone

    winner, alone = search()
    assert winner != "row_broadcast"
    assert alone["row_broadcast"] > min(alone.values())
    cheap = dataclasses.replace(
        toy, name="row_broadcast_cheap", strategies=(Variant("row_broadcast_cheap"),),
        analytic_cycles=lambda *args, **kwargs: row_broadcast_cycles(*args, **kwargs) // 10,
    )  # fmt: skip
    registered(cheap)
    assert search()[0] == "row_broadcast_cheap"


def test_a_model_compiles_with_only_the_registered_algorithm(toy, wse2):
    """A whole model compiles with the toy as its only strategy: every GEMM pass uses it,
    with its colors, route families and tile order in the plan."""
    options = CompileOptions(batch=4, dtype="fp32", strategies=("row_broadcast",))
    plan = compile_plan(load_model(f"{ZOO}/fc-digits.yaml"), wse2, options)
    gemms = [p for _, _, p in plan.placements() if isinstance(p, GemmPlacement)]
    assert gemms
    for placed in gemms:
        assert placed.algorithm == "row_broadcast"
        assert placed.mapping == {"m": "grid rows", "n": "grid columns",
                                  "k": "streamed from the north edge"}  # fmt: skip
        assert [f["carries"] for f in placed.routes] == ["A", "B"][: len(placed.routes)]
        order = placed.memoryx_tile_order
        if order is not None and order["direction"] == "in":
            assert order["tiles"] == placed.rows_cols[1]


def test_sparse_runs_take_the_strategies_of_zero_skipping_algorithms():
    """Weight streaming skips zero weights (its record says how B streams compressed); a
    sparse run searches its strategies only."""
    from wafersim.kernels.gemm_algorithms import sparse_strategies

    assert sparse_strategies() == ("weight_stream_chain", "weight_stream_tree")
    assert all(GEMM_ALGORITHMS[name].zero_skipping is None for name in GEMM_ALGORITHMS
               if name != "weight_stream")  # fmt: skip


def test_operands_drawn_in_slices_are_the_whole_draw_cast(monkeypatch):
    """The float32 operand drawn a few rows at a time has the values of one float64 draw
    cast (a seed gives the same GEMM however the draw is cut)."""
    monkeypatch.setattr(algorithm, "DRAW_VALUES", 20)
    drawn = algorithm.standard_normal32(np.random.default_rng(3), 13, 7)
    expected = np.random.default_rng(3).standard_normal((13, 7)).astype(np.float32)
    assert drawn.dtype == np.float32
    np.testing.assert_array_equal(drawn, expected)
