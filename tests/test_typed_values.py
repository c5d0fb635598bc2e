"""Typed values: the dtype names have one home (``wafer.dtypes``), and a GEMM's shape is a
record inside the kernels and the compiler, a dict only where a script or a JSON file sees it."""

from __future__ import annotations

import json
import typing

import pytest
from wafersim.fabric.program import DTYPES, HALF_DTYPES, value_bytes
from wafersim.kernels.fast_tier import fast_cycles
from wafersim.kernels.gemm_algorithms import GEMM_ALGORITHMS
from wafersim.kernels.gemm_shape import DIMS, GemmShape
from wafersim.kernels.registry import analytic_cycles
from wafersim.memoryx import store
from wafersim.wafer import dtypes
from wafersim.wafer.dtypes import DTYPE_NAMES, DType
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset


def test_dtype_names_are_the_literal_type_arguments():
    """The tuple of names is the Literal type's arguments, in the same order."""
    assert typing.get_args(DType) == DTYPE_NAMES


def test_every_dtype_table_is_keyed_by_the_names():
    """Each table of dtypes has exactly the names as keys, in their order; the 16-bit ones
    are among them."""
    assert tuple(DTYPES) == DTYPE_NAMES
    assert tuple(dtypes.DTYPE_BYTES) == DTYPE_NAMES
    assert store.DTYPE_BYTES is dtypes.DTYPE_BYTES
    assert HALF_DTYPES is dtypes.HALF_DTYPES
    assert set(HALF_DTYPES) < set(DTYPE_NAMES)
    assert all(DTYPES[name][1] == dtypes.DTYPE_BYTES[name] for name in DTYPE_NAMES)


def test_an_unknown_dtype_is_refused_in_one_line_naming_the_valid_ones():
    """A dtype from a user is checked at run time, whatever its annotation says."""
    with pytest.raises(ConfigError, match=r"^dtype='fp8' is not one of: fp32, fp16, bf16$"):
        value_bytes("fp8")


def test_a_gemm_shape_reads_a_dict_and_writes_one_back():
    """``of`` takes the dict form or a record; ``as_dict`` gives the JSON form, keys in
    m, k, n order."""
    shape = GemmShape.of({"n": 5, "m": 3, "k": 4})
    assert shape == GemmShape(3, 4, 5)
    assert GemmShape.of(shape) is shape
    assert json.dumps(shape.as_dict()) == '{"m": 3, "k": 4, "n": 5}'
    assert [shape.size(dim) for dim in DIMS] == [3, 4, 5]
    assert shape.with_sizes({"k": 8, "n": 2}) == GemmShape(3, 8, 2)


def test_a_gemm_shape_refuses_an_unknown_dimension():
    """A dimension name other than m, k, n is an error listing the valid ones."""
    with pytest.raises(KeyError, match="is not one of: m, k, n"):
        GemmShape(1, 2, 3).size("count")
    with pytest.raises(KeyError, match="is not one of: m, k, n"):
        GemmShape(1, 2, 3).with_sizes({"x": 1})


@pytest.mark.parametrize("name", list(GEMM_ALGORITHMS))
def test_a_record_costs_a_dict_and_a_record_alike(name):
    """The registry's dict and the record give the same analytic cycles and hops."""
    tiny, record = preset("tiny"), GEMM_ALGORITHMS[name]
    as_dict, as_record = {"m": 48, "k": 64, "n": 32}, GemmShape(48, 64, 32)
    assert analytic_cycles("gemm", name, as_dict, 4, 4, tiny) == record.cycles(
        as_record, 4, 4, tiny, "fp32"
    )
    assert record.hops(as_dict, 4, 4, "fp32") == record.hops(as_record, 4, 4, "fp32")


def test_the_fast_tier_writes_its_reduced_shapes_as_dicts():
    """The fast tier's reduced runs, as the JSON gets them, name their shapes by m, k, n."""
    fast = fast_cycles("summa", {"m": 64, "k": 64, "n": 64}, 8, 8, preset("tiny"), reduced_side=4)
    for run in json.loads(json.dumps(fast.reduced)):
        assert list(run["shape"]) == list(DIMS)
