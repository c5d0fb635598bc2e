"""The CPU engine's router-level functions as CUDA device functions.

The router-level functions are not written again here. ``fabric/_engine_jit.py`` and
``fabric/_fp16.py`` are executed a second time, from their own source, in modules where the
decorator (``engine_function``, resp. ``njit``) makes a CUDA device function: every
``@engine_function`` function of the CPU engine (``_program_cycle``, ``_traffic_cycle``,
``_catch_up`` and what they call) is then also compiled for the GPU, and the CPU engine stays
the one source of truth.
Device functions compile on first use, so the CPU-only host loop (``run_cycles``, the row loops,
``_pending_work``, whose array reductions a device cannot do) is defined there but never built.

Three names differ. ``_record_packet`` adds to the packet counters of the sink's row, which
the routers of a row share. On the CPU a row is one thread's work; here each router is a
thread, so the CUDA version here adds atomically (integer adds, whose sums do not depend on
their order). Everything else a router writes is its own state or a link slot only it drives.
``mul_rn`` is libdevice's ``fmul_rn``: a product rounded alone, which NVVM cannot fuse with
the add after it (by default it does, and the GPU's ``acc + a * b`` then differs from the CPU's
in the last bit). And ``np`` there is numpy with ``log1p`` and ``ceil`` taken from ``math``
(numba-cuda has no device loops for those two ufuncs; see ``_numpy_for_devices``).
"""

from __future__ import annotations

import ast
import math
import types
from pathlib import Path

import numba
import numpy as np
from numba import cuda
from numba.cuda import libdevice
from wafersim.fabric import _engine_jit as K
from wafersim.fabric import _fp16, numba_compat

SIMULATED = numba.config.ENABLE_CUDASIM
if SIMULATED:  # the simulator's module swap races; its barrier polls (fabric._cudasim_fixes)
    numba_compat.install(numba_compat.CUDASIM_FIXES)


def _device(**_options):
    """The CUDA stand-in for ``_engine_jit.engine_function`` and ``_fp16``'s ``njit``:
    a device function.

    The CPU options (cache, NRT, IR inlining, parallel) do not apply; NVVM inlines by itself.
    """
    return cuda.jit(device=True)


def _device_module(module: types.ModuleType, provided: dict) -> types.ModuleType:
    """``module`` executed again from its source file, with the top-level definitions and
    imported names that ``provided`` holds replaced by its values (an import of several
    names keeps the others)."""
    path = Path(module.__file__)
    tree = ast.parse(path.read_text(), str(path))
    kept, replaced = [], set()
    for node in tree.body:
        names = _bound_names(node)
        if names and names <= provided.keys():
            replaced |= names
            continue
        if isinstance(node, ast.ImportFrom) and names & provided.keys():
            replaced |= names & provided.keys()
            node.names = [a for a in node.names if (a.asname or a.name) not in provided]
        kept.append(node)
    missing = provided.keys() - replaced
    if missing:
        raise ImportError(f"{path.name} no longer defines {sorted(missing)}")
    tree.body = kept
    device = types.ModuleType(f"{module.__name__}_cuda", module.__doc__)
    device.__dict__.update(provided, __file__=str(path))
    exec(compile(tree, str(path), "exec"), device.__dict__)
    return device


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return set()


def _numpy_for_devices() -> types.ModuleType:
    """numpy as the device module sees it: numba-cuda has no device loop for the ufuncs
    ``np.log1p`` and ``np.ceil`` (``_geometric`` calls them on scalars); ``math.log1p`` and
    ``math.ceil`` compute the same values (``_geometric`` takes ``int`` of the ceiling)."""
    shim = types.ModuleType(np.__name__, np.__doc__)
    shim.__dict__.update(vars(np))
    shim.log1p, shim.ceil = math.log1p, math.ceil
    return shim


@cuda.jit(device=True)
def _record_packet(r, t, created, injected, tr):
    """``_engine_jit._record_packet`` with atomic adds: the routers of a row share its counters."""
    latency = t - created
    row = r // tr.width
    cuda.atomic.add(tr.packets, row, 1)
    cuda.atomic.add(tr.latency_sum, row, latency)
    cuda.atomic.add(tr.network_latency_sum, row, t - injected)
    cuda.atomic.add(tr.hist, (row, min(latency, tr.hist.shape[1] - 1)), 1)


@cuda.jit(device=True)
def _mul_rn(a, b):
    """``_engine_jit.mul_rn``: libdevice's ``fmul_rn``, a product NVVM never fuses into an FMA."""
    if SIMULATED:  # the simulator's libdevice functions are stubs that return None
        return a * b
    return libdevice.fmul_rn(a, b)


_FP16 = _device_module(_fp16, {"njit": _device})
DEVICE = _device_module(
    K,
    {
        "engine_function": _device,
        "np": _numpy_for_devices(),
        "get_half": _FP16.get_half,
        "half_bits": _FP16.half_bits,
        "set_half": _FP16.set_half,
        "word_half": _FP16.word_half,
        "_record_packet": _record_packet,
        "mul_rn": _mul_rn,
    },
)
