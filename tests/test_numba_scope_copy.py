"""fabric._numba_scope_copy: Numba's IR scopes copied directly make the same copy as the
generic deep copy they replace (issue 28: the engine's first compile)."""

from __future__ import annotations

import copy

from numba.core import ir
from numba.core.compiler import run_frontend

from fabric import _numba_scope_copy


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
    import fabric._kernels  # noqa: F401 (installs it)

    assert vars(ir.Scope).get("__deepcopy__") is _numba_scope_copy._copy_scope
    assert _numba_scope_copy.install()
