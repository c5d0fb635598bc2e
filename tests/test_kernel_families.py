"""Kernel family records: every registered kernel is a complete family record, defined
beside its builder, and the kernels' registry reads every fact from the records, with no
branch of its own for any kernel."""

from __future__ import annotations

import ast
import collections.abc
import dataclasses
import inspect
import re
import types
import typing
from pathlib import Path

import pytest
from wafersim.kernels import registry
from wafersim.kernels.algorithm import GemmAlgorithm
from wafersim.kernels.family import KernelAlgorithm, KernelFamily
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.registry import FAMILIES, KERNELS, run_kernel
from wafersim.kernels.wiring import palette_size
from wafersim.wafer.dtypes import DTYPE_NAMES
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset

SPEC = preset("tiny")
REGISTRY_FILE = Path(registry.__file__)
CLI_OPTIONS = ("reduce", "density", "scope", "inputs", "outputs")  # `wafersim kernel` flags
RECORDS = [
    (kernel, algo)
    for kernel, family in FAMILIES.items()
    for algo, record in family.algorithms.items()
    if isinstance(record, KernelAlgorithm)
]


def small_case(kernel: str) -> tuple[dict[str, int], int, int]:
    """A shape and a square grid (rows, cols: Cannon's are) every algorithm of ``kernel``
    runs on in well under a second: an FFT puts a pencil on each PE, so its n is 4."""
    size = 4 if kernel == "fft" else 16
    return {key: size for key in FAMILIES[kernel].shape_keys}, 4, 4


# ---- completeness ----


def conforms(value, hint) -> bool:
    """Whether ``value`` has the declared type ``hint`` (callables: callable; a tuple of
    ``X, ...``: each item an ``X``; a mapping: not empty, each key and value as declared)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        return any(conforms(value, arg) for arg in args)
    if hint is type(None):
        return value is None
    if origin is collections.abc.Callable:
        return callable(value)
    if origin is typing.Literal:
        return value in args
    if origin is tuple:
        return isinstance(value, tuple) and all(conforms(item, args[0]) for item in value)
    if origin is collections.abc.Mapping:
        return (isinstance(value, collections.abc.Mapping) and len(value) > 0
                and all(conforms(k, args[0]) and conforms(v, args[1])
                        for k, v in value.items()))  # fmt: skip
    return isinstance(value, hint)


def missing_fields(record) -> list[str]:
    """The fields of a record not set as declared."""
    hints = typing.get_type_hints(type(record))
    return [f.name for f in dataclasses.fields(record)
            if not conforms(getattr(record, f.name), hints[f.name])]  # fmt: skip


def test_an_incomplete_record_is_caught():
    """The completeness check names a field left out or of the wrong type."""
    record = KERNELS["stencil"]["star7"]
    assert missing_fields(dataclasses.replace(record, build=None)) == ["build"]
    assert missing_fields(dataclasses.replace(record, dtypes=("fp8",))) == ["dtypes"]
    assert missing_fields(dataclasses.replace(record, option_names=["in"])) == ["option_names"]
    family = FAMILIES["gemv"]
    assert missing_fields(dataclasses.replace(family, algorithms={})) == ["algorithms"]
    assert missing_fields(dataclasses.replace(family, drawn_values=3)) == ["drawn_values"]


@pytest.mark.parametrize("kernel", list(FAMILIES))
def test_every_family_is_complete(kernel):
    """Every registered kernel is a KernelFamily, keyed by its name, each field set as
    declared; it takes dimensions among m, k, n; each algorithm keyed by its name."""
    family = FAMILIES[kernel]
    assert isinstance(family, KernelFamily)
    assert family.name == kernel
    assert missing_fields(family) == []
    assert family.shape_keys
    assert set(family.shape_keys) <= {"m", "k", "n"}
    assert all(record.name == algo for algo, record in family.algorithms.items())
    assert KERNELS[kernel] is family.algorithms  # the registry's table is the record's


@pytest.mark.parametrize(("kernel", "algo"), RECORDS)
def test_every_algorithm_record_is_complete(kernel, algo):
    """Every field of a non-GEMM algorithm record is set as declared; a kernel that runs in
    fewer dtypes than all says why; its options are flags the CLI passes on."""
    record = KERNELS[kernel][algo]
    assert missing_fields(record) == []
    assert record.dtypes
    assert set(record.dtypes) <= set(DTYPE_NAMES)
    assert bool(record.dtype_refusal) == (record.dtypes != DTYPE_NAMES)
    assert set(record.option_names) <= set(CLI_OPTIONS)


def test_gemm_is_the_table_of_gemm_records():
    """The gemm family's algorithms are the GEMM records (tests/test_algorithm_records.py
    checks each), the same table an algorithm is registered in at run time."""
    from wafersim.kernels.gemm_algorithms import GEMM_ALGORITHMS

    assert FAMILIES["gemm"].algorithms is GEMM_ALGORITHMS
    assert all(isinstance(record, GemmAlgorithm) for record in GEMM_ALGORITHMS.values())


def defining_module(function) -> str:
    """The module a record's function (or the function a ``partial`` wraps) is defined in."""
    module = inspect.getmodule(getattr(function, "func", function))
    assert module is not None
    return module.__name__


@pytest.mark.parametrize(("kernel", "algo"), RECORDS)
def test_a_record_lives_beside_its_builder(kernel, algo):
    """A record's builder, cost, footprint and colors rule come from one module, the one
    that defines the family: the kernel's own, not the registry."""
    record = KERNELS[kernel][algo]
    functions = [record.build, record.analytic_cycles, record.sram_words, record.colors]
    modules = {defining_module(f) for f in functions if f is not None}
    assert len(modules) == 1
    assert modules != {registry.__name__}


# ---- the registry reads every fact from the records ----


@pytest.mark.parametrize(
    ("kernel", "algo"), [(k, a) for k, family in FAMILIES.items() for a in family.algorithms]
)
def test_every_record_answers_the_registry(kernel, algo):
    """Every algorithm answers the registry's calls alike: its busiest PE's SRAM words,
    its analytic cycles and its family's drawn values are positive integers."""
    shape, rows, cols = small_case(kernel)
    record = KERNELS[kernel][algo]
    for value in (
        record.footprint(shape, rows, cols, SPEC, "fp32"),
        record.cycles(shape, rows, cols, SPEC, "fp32"),
        FAMILIES[kernel].drawn_values(shape, rows, cols),
    ):
        assert isinstance(value, int)
        assert value > 0


RESTRICTED = [(k, a) for k, a in RECORDS if KERNELS[k][a].dtypes != DTYPE_NAMES]


@pytest.mark.parametrize(("kernel", "algo"), RESTRICTED)
def test_a_dtype_the_record_does_not_run_in_is_refused_with_its_reason(kernel, algo):
    """Through the registry, a dtype outside the record's is refused with its reason, by
    the estimate and by the engine run alike, before any input is drawn."""
    record = KERNELS[kernel][algo]
    other = next(d for d in DTYPE_NAMES if d not in record.dtypes)
    shape, rows, cols = small_case(kernel)
    line = f"^dtype='{other}': {re.escape(record.dtype_refusal)}$"
    with pytest.raises(ConfigError, match=line):
        registry.analytic_cycles(kernel, algo, shape, rows, cols, SPEC, other)
    with pytest.raises(ConfigError, match=line):
        run_kernel(kernel, algo, shape, kernel_grid(rows, cols), SPEC, other)


COLOR_CASES = [
    (kernel, algo, options)
    for kernel, algo in RECORDS
    for options in (
        [{}, {"inputs": "resident"}, {"outputs": "gathered"}]
        if "inputs" in KERNELS[kernel][algo].option_names
        else [{"scope": scope} for scope in ("row", "grid")]
        if "scope" in KERNELS[kernel][algo].option_names
        else [{}]
    )
]


@pytest.mark.parametrize(("kernel", "algo", "options"), COLOR_CASES)
def test_a_records_colors_bound_the_engines(kernel, algo, options):
    """The colors a record says it takes from the palette are at least those its engine
    run routes on (some a long line's algorithm reserves go unused on a short one)."""
    record = KERNELS[kernel][algo]
    shape, rows, cols = small_case(kernel)
    colors = record.colors(algo, shape, rows, cols, SPEC, **options)
    result = run_kernel(kernel, algo, shape, kernel_grid(rows, cols), SPEC, **options)
    assert 1 <= result.colors_used <= colors


@pytest.mark.parametrize(
    ("kernel", "algo", "sides"),
    [("stencil", "star7", (3, 4)), ("stencil", "star25", (6, 7)), ("stencil", "star25", (1, 3)),
     ("fft", "pencil", (2, 2)), ("fft", "pencil", (4, 4))],
)  # fmt: skip
def test_stencil_and_fft_colors_are_the_engines(kernel, algo, sides):
    """A stencil's and an FFT's every color is routed on: their rules are exact."""
    rows, cols = sides
    shape = {"n": rows} if kernel == "fft" else {"n": 4}
    colors = KERNELS[kernel][algo].colors(algo, shape, rows, cols, SPEC)
    assert run_kernel(kernel, algo, shape, kernel_grid(rows, cols), SPEC).colors_used == colors


COLLECTIVE_RECORDS = [(k, a) for k, a in RECORDS if "scope" in KERNELS[k][a].option_names]


@pytest.mark.parametrize(("kernel", "algo"), COLLECTIVE_RECORDS)
@pytest.mark.parametrize("router_colors", [8, 12])
def test_a_collective_is_refused_when_its_colors_exceed_the_palette(kernel, algo, router_colors):
    """A collective's estimate is refused exactly when the colors its record says it takes
    exceed what the router leaves kernels, with that count in the line."""
    spec = SPEC.replace({"router.colors": router_colors})
    shape, rows, cols = {"n": 48}, 6, 8
    colors = KERNELS[kernel][algo].colors(algo, shape, rows, cols, spec)
    if colors <= palette_size(spec):
        assert registry.analytic_cycles(kernel, algo, shape, rows, cols, spec) > 0
        return
    with pytest.raises(ConfigError, match=f"needs {colors} colors: router.colors="):
        registry.analytic_cycles(kernel, algo, shape, rows, cols, spec)


def test_a_family_added_to_the_table_needs_no_registry_change(monkeypatch):
    """A family the registry has never seen (here the broadcasts under a new name) is
    checked, estimated and run from its record alone."""
    family = dataclasses.replace(FAMILIES["broadcast"], name="spread")
    monkeypatch.setitem(FAMILIES, "spread", family)
    registry.check_dimensions("spread", {"m": None, "k": None, "n": 8})
    with pytest.raises(ConfigError, match="spread takes --n only"):
        registry.check_dimensions("spread", {"m": 8, "k": None, "n": None})
    shape = registry.shape_of("spread", None, None, 8)
    assert registry.analytic_cycles("spread", "tree", shape, 3, 4, SPEC) > 0
    assert run_kernel("spread", "tree", shape, kernel_grid(3, 4), SPEC).max_abs_error == 0


# ---- no branch of the registry's own ----


def kernel_literals(source: str, kernels) -> list[str]:
    """Where a kernel's name is a string in ``source`` (a comparison ``kernel == "gemm"``,
    a table keyed by kernels, a ``match`` case), but for a ``Literal[...]`` annotation's."""
    tree = ast.parse(source)
    annotated = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "Literal"
        for inner in ast.walk(node.slice)
    }
    return [f"line {node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in kernels
            and id(node) not in annotated]  # fmt: skip


def test_the_branch_check_finds_a_branch():
    """The check below names a comparison with a kernel's name and a table keyed by one,
    and lets a ``Literal`` annotation pass."""
    source = (
        "def f(kernel: Literal['gemm']):\n"
        "    if kernel == 'stencil':\n"
        "        return 1\n"
        "    return {'gemv': 2}.get(kernel) if kernel in ('fft', 'x') else 0\n"
    )
    found = kernel_literals(source, FAMILIES)
    assert sorted(found) == ["line 2: 'stencil'", "line 4: 'fft'", "line 4: 'gemv'"]


def test_the_registry_has_no_branch_for_any_kernel():
    """kernels/registry.py names no kernel: no ``kernel == "..."``, no table keyed by
    kernel names; every per-kernel fact is read from the family records."""
    assert kernel_literals(REGISTRY_FILE.read_text(), FAMILIES) == []
