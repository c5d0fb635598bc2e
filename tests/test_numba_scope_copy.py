"""fabric._numba_scope_copy: Numba's IR scopes copied directly make the same copy as the
generic deep copy they replace, and the inliner's block copies share one memo (which shortens
the engine's first compile)."""

from __future__ import annotations

import copy

import numpy as np
from numba import njit
from numba.core import inline_closurecall, ir
from numba.core.compiler import run_frontend
from wafersim.fabric import _numba_scope_copy


def sample(x, n):
    total = 0.0
    for i in range(n):
        if x[i] > 0:
            total += x[i]
        else:
            total -= x[i]
    return total


def copies(block: ir.Block, direct: bool) -> ir.Block:
    """A deep copy of ``block`` with or without the direct scope copy."""
    saved = vars(ir.Scope).get("__deepcopy__")
    try:
        if direct:
            ir.Scope.__deepcopy__ = _numba_scope_copy._copy_scope
        elif saved is not None:
            del ir.Scope.__deepcopy__
        return copy.deepcopy(block)
    finally:
        if saved is not None:
            ir.Scope.__deepcopy__ = saved
        elif "__deepcopy__" in vars(ir.Scope):
            del ir.Scope.__deepcopy__


def test_the_direct_copy_equals_the_generic_one_and_leaves_the_original_alone():
    func_ir = run_frontend(sample)
    for block in func_ir.blocks.values():
        before = str(block.scope.localvars), dict(block.scope.redefined)
        generic, direct = copies(block, False), copies(block, True)
        assert [str(s) for s in direct.body] == [str(s) for s in generic.body]
        assert direct.scope == generic.scope
        assert fields(direct.scope) == fields(generic.scope)  # variable by variable
        assert direct.scope is not block.scope
        for stmt in direct.body:  # the statements' variables are the copy's own
            for var in stmt.list_vars():
                assert var.scope is direct.scope
                assert direct.scope.localvars.get(var.name) is var
        direct.scope.redefine("total", block.loc)  # a change to the copy...
        assert (str(block.scope.localvars), dict(block.scope.redefined)) == before  # ...only


def fields(scope: ir.Scope) -> list:
    """Each variable's name, location and whether it belongs to ``scope`` itself."""
    return [(name, str(var.loc), var.scope is scope) for name, var in
            scope.localvars._con.items()]  # fmt: skip


def test_a_variable_of_another_scope_keeps_its_own():
    """Numba's passes move variables between scopes (``ir_utils.transfer_scope``): such a
    variable's copy belongs to a copy of its own scope, as the generic copy makes it."""
    loc = ir.Loc("test", 1)
    mine, other = ir.Scope(None, loc), ir.Scope(None, loc)
    mine.localvars.define("v", other.define("v", loc))
    block = ir.Block(mine, loc)
    block.append(ir.Assign(ir.Const(1, loc), mine.localvars.get("v"), loc))
    generic, direct = copies(block, False), copies(block, True)
    assert fields(direct.scope) == fields(generic.scope) == [("v", str(loc), False)]


def test_it_is_installed_for_the_engine():
    import wafersim.fabric._engine_jit  # noqa: F401 (installs it)

    assert vars(ir.Scope).get("__deepcopy__") is _numba_scope_copy._copy_scope
    assert inline_closurecall.copy is _numba_scope_copy._SHARED
    assert _numba_scope_copy.install()


def test_an_inlining_copies_the_blocks_of_one_scope_with_one_memo():
    """Inside ``inline_ir`` the blocks of one source scope share one copy of it (with its
    variables, as one deep copy of all blocks makes them); outside, each copy is its own."""
    blocks = list(run_frontend(sample).blocks.values())
    shared = _numba_scope_copy._SharedMemoCopies()
    apart = [shared.deepcopy(block) for block in blocks]
    assert len({id(block.scope) for block in apart}) == len(blocks) > 1
    together = shared.sharing(lambda: [shared.deepcopy(block) for block in blocks])()
    scope = together[0].scope
    assert all(block.scope is scope for block in together)
    assert scope is not blocks[0].scope
    for block in together:
        for stmt in block.body:
            for var in stmt.list_vars():
                assert scope.localvars.get(var.name) is var
    assert [str(s) for b in together for s in b.body] == [str(s) for b in apart for s in b.body]
    assert shared.memos == []


@njit(inline="always")
def _clamped(x, low, high):
    if x < low:
        return low
    for _ in range(2):
        x = x * 1.0
    return min(x, high)


@njit
def _sum_clamped(values):
    total = 0.0
    for v in values:
        total += _clamped(v, 0.0, 1.0) + _clamped(-v, -0.5, 0.5)
    return total


def test_an_inlined_function_computes_what_python_does():
    assert _numba_scope_copy.install()  # before the compile
    values = np.linspace(-2, 2, 41)
    assert _sum_clamped(values) == _sum_clamped.py_func(values)
