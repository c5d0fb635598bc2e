"""The suite's set-up: the fast loop (``-m "not slow"``), shared wafer specs, and the
workers' share of the engine's compile.

The fast loop
-------------
Tests marked ``slow`` are those that take more than about two seconds, and every test that
runs a subprocess (the CLI as a user runs it, ``git``, ``mount``, a killed writer), builds or
installs the wheel, runs the documentation's examples or the benchmarks behind
docs/validation.md, fuzzes the input files, or runs a sweep (serial, Dask or a study). A
module that is all of that carries ``pytestmark = pytest.mark.slow``; a single case of a
parametrized test carries ``pytest.param(..., marks=pytest.mark.slow)``. Everything else is
the fast loop::

    python -m pytest -m "not slow"          # the edit-test loop: under two minutes warm
    python -m pytest -m slow                # the rest
    python -m pytest                        # everything, slow included (the README, CI)
    python -m pytest -m "not slow" tests/test_defects.py   # one module's fast tests

"Warm" means Numba's cache already holds the engine's compiles (any earlier run made them);
after an edit under fabric/ the first run compiles again. A new test that runs a subprocess,
a sweep or a whole training run, or takes over two seconds (``--durations=0`` shows), gets
``@pytest.mark.slow``. :data:`SLOW_ELSEWHERE` marks tests of modules that their owners keep
without the marker in the file.

Shared specs
------------
:func:`tiny` and :func:`wse2` are the presets, built once a session: a
:class:`~wafer.spec.WaferSpec` is a frozen dataclass (its sections too) and ``replace``
returns a new one, so a test that only reads a spec can share it.

The engine's compile
--------------------
With pytest-xdist, the workers compile the CPU engine's specializations between them before
their first test (``fabric.precompile.compile_share``). On a fresh clone every worker soon
needs the engine, and its compile lock let one process compile at a time while the others
waited. Each worker now compiles its share at the same time as the others, then loads the
rest from Numba's cache. Only where the collected tests import the engine (a selection that
does not skips it); once cached, a share is a load.
"""

from __future__ import annotations

import sys

import pytest

# Modules whose files are edited elsewhere: the tests that belong to the slow set by the rule
# above, by module file name and test function name (every case of a parametrized test), or
# None for the whole module.
SLOW_ELSEWHERE: dict[str, frozenset[str] | None] = {
    "test_fuzz_inputs.py": None,  # fuzzes every input file, megabyte values in every field
    "test_hostile_inputs_two.py": frozenset({  # a megabyte value in each field: a second each
        "test_a_megabyte_value_in_a_run_config_is_a_short_line",
        "test_a_megabyte_value_in_a_model_file_is_a_short_line",
        "test_a_megabyte_value_in_a_sweep_file_is_a_short_line",
    }),
    "test_compile_once.py": frozenset({  # processes compiling together
        "test_two_processes_starting_together_compile_once",
        "test_another_signature_compiles_while_one_is_being_compiled",
        "test_two_processes_saving_at_once_keep_every_entry_of_the_cache",
    }),
    "test_precompile.py": frozenset({  # the background compile's process
        "test_the_background_process_compiles_quietly_and_exits",
        "test_the_helper_names_its_modes_on_a_wrong_command_line",
    }),
    "test_fabric_cuda.py": frozenset({  # the CUDA simulator in a subprocess
        "test_cuda_engine_matches_cpu_bit_for_bit_in_the_simulator",
        "test_cuda_kernels_compile_for_a_gpu_where_numba_cuda_and_nvvm_are_installed",
        "test_simulator_threads_in_device_functions_of_one_module_keep_the_fake_cuda",
        "test_the_simulators_barrier_waits_releases_and_aborts",
    }),
    "test_numba_compat.py": frozenset({  # Python in a subprocess
        "test_version_names_numba_and_the_patches_without_importing_numba",
        "test_outside_their_window_the_simulators_fixes_are_not_installed_and_it_still_runs",
    }),
}  # fmt: skip


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(items):
    for item in items:
        names = SLOW_ELSEWHERE.get(item.path.name, frozenset())
        if names is None or getattr(item, "originalname", item.name) in names:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def tiny():
    """The ``tiny`` preset: 8 x 8 logical PEs with WSE-2 PEs, one spare row."""
    from wafersim.wafer.presets import preset

    return preset("tiny")


@pytest.fixture(scope="session")
def wse2():
    """The ``wse2`` preset: the published WSE-2 (750 x 994 logical PEs)."""
    from wafersim.wafer.presets import preset

    return preset("wse2")


def pytest_collection_finish(session):
    worker = getattr(session.config, "workerinput", None)  # None: no xdist
    if worker is None or "wafersim.fabric.engine" not in sys.modules:
        return
    from wafersim.fabric.precompile import compile_share

    compile_share(int(worker["workerid"].removeprefix("gw")), worker["workercount"])
