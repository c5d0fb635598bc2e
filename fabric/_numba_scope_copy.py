"""A faster deep copy of Numba's IR scopes, for the engine's compile.

Numba inlines an ``inline="always"`` function by copying the callee's IR one block at a time
(``numba.core.inline_closurecall.InlineWorker.inline_ir``), each with ``copy.deepcopy`` of its
own. A block refers to its function's scope, and the scope to every variable of the function,
so each block's copy copies the whole scope again through Python's generic deep copy: the
engine's row step inlines about 300 callees, some of thousands of variables over hundreds of
blocks, and its first compile spent much of its time there (``copy.deepcopy`` led a
profile of ``fabric.precompile.compile_engine``).

:func:`install` gives ``numba.core.ir.Scope`` a ``__deepcopy__`` that makes the same copy
directly: a new scope, a new variable for each of its variables (registered in the copy's
memo, so that the block's statements refer to these very objects, as the generic copy does;
a variable that belongs to another scope, which Numba's passes make, copied generically),
and copies of its redefinition tables; the parent scope copied as before.

It also lets the block copies of one inlining share one copy memo per source scope
(:class:`_SharedMemoCopies`), as a single deep copy of the callee's blocks would: their scope
is then copied once, not once a block (a block's copy used to get a scope of its own; every
block of the source shares one, as the copy's blocks now do: Numba's own ``FunctionIR`` and
the inliner, which gives all of them the caller's scope right after, expect that). Nothing
else changes. ``fabric.numba_compat.SCOPE_COPY`` installs it inside its tested window of Numba
versions, and :func:`install` only where ``Scope``, ``VarMap`` and ``Var`` hold the attributes
this copy knows and the inliner is the one read here; elsewhere Numba copies as it always did.
"""

from __future__ import annotations

import copy
from collections import defaultdict

from numba.core import inline_closurecall, ir

SCOPE_FIELDS = {"parent", "localvars", "loc", "redefined", "var_redefinitions"}
VAR_FIELDS = {"scope", "name", "loc"}


def _copy_scope(scope: ir.Scope, memo: dict) -> ir.Scope:
    new = ir.Scope.__new__(ir.Scope)
    memo[id(scope)] = new
    new.parent = copy.deepcopy(scope.parent, memo)
    new.loc = scope.loc  # locations are not changed once made (Var's copy shares them too)
    new.localvars = ir.VarMap()
    variables = new.localvars._con
    for name, var in scope.localvars._con.items():
        twin = memo.get(id(var))
        if twin is None and var.scope is not scope:  # Numba moves variables between scopes
            twin = copy.deepcopy(var, memo)
        elif twin is None:
            twin = ir.Var.__new__(ir.Var)
            twin.scope, twin.name, twin.loc = new, var.name, var.loc
            memo[id(var)] = twin
        variables[name] = twin
    new.redefined = defaultdict(int, scope.redefined)
    new.var_redefinitions = defaultdict(
        set, {name: set(names) for name, names in scope.var_redefinitions.items()}
    )
    return new


class _SharedMemoCopies:
    """Stands in for the ``copy`` module inside ``numba.core.inline_closurecall``, whose one
    use of it is ``InlineWorker.inline_ir``'s block-by-block ``copy.deepcopy``. During an
    ``inline_ir`` call, the blocks of one source scope are copied with one memo."""

    def __init__(self):
        self.memos: list[dict] = []  # one per inline_ir call in progress (they nest)

    def deepcopy(self, value, memo=None):
        if memo is not None or not self.memos or not isinstance(value, ir.Block):
            return copy.deepcopy(value, memo)
        memos = self.memos[-1]
        memo = memos.get(id(value.scope))
        if memo is None:  # the memo keeps the source scope alive, so its id stays its own
            memo = memos[id(value.scope)] = {}
        return copy.deepcopy(value, memo)

    def sharing(self, inline_ir):
        """``inline_ir`` with a memo table of its own."""

        def inline_ir_sharing(*args, **kwargs):
            self.memos.append({})
            try:
                return inline_ir(*args, **kwargs)
            finally:
                self.memos.pop()

        inline_ir_sharing.__wrapped__ = inline_ir
        return inline_ir_sharing


_SHARED = _SharedMemoCopies()


def _knows_numba() -> bool:
    """Whether this Numba's scopes and variables hold exactly the fields the copy makes."""
    loc = ir.Loc("wafersim", 0)
    scope = ir.Scope(None, loc)
    var = scope.define("x", loc)
    return (
        set(vars(scope)) == SCOPE_FIELDS
        and set(vars(scope.localvars)) == {"_con"}
        and set(vars(var)) == VAR_FIELDS
        and "__deepcopy__" not in vars(ir.Scope)
        and inline_closurecall.copy is copy
        and _copies_block_by_block(inline_closurecall.InlineWorker.inline_ir)
    )


def _copies_block_by_block(inline_ir) -> bool:
    """Whether ``inline_ir`` is the inliner this module knows: its only deep copy is of each
    block of the callee's IR."""
    names = inline_ir.__code__.co_consts
    code = next((c for c in names if getattr(c, "co_name", "") == "copy_ir"), None)
    return code is not None and "deepcopy" in code.co_names


def install() -> bool:
    """Give ``ir.Scope`` the direct deep copy where this Numba allows; returns whether it is
    in place (it is installed once per process)."""
    if vars(ir.Scope).get("__deepcopy__") is _copy_scope:
        return True
    if not _knows_numba():
        return False
    ir.Scope.__deepcopy__ = _copy_scope
    inline_closurecall.copy = _SHARED
    worker = inline_closurecall.InlineWorker
    worker.inline_ir = _SHARED.sharing(worker.inline_ir)
    return True
