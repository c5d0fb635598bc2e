"""The public API: package roots export what a script needs, lazily."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import types

import pytest

ROOTS = tuple(
    f"wafersim.{layer}" for layer in ("wafer", "fabric", "kernels", "compiler", "memoryx")
)
ROOTS += ("wafersim",)


@pytest.mark.parametrize("root", ROOTS)
def test_every_exported_name_is_the_object_its_module_defines(root):
    """Every export resolves, also after all the package's modules are imported (a name
    that is also a submodule's would then be the module: none is), and has a docstring."""
    package = importlib.import_module(root)
    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{root}.{info.name}")
    for name, module in package.EXPORTS.items():
        value = getattr(package, name)
        assert not isinstance(value, types.ModuleType), name
        assert value is getattr(importlib.import_module(module), name)
        if callable(value):
            assert value.__doc__, name
    assert set(package.EXPORTS) <= set(dir(package))


def test_an_unknown_name_is_an_attribute_error():
    import wafersim

    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = wafersim.nothing


@pytest.mark.slow
def test_importing_a_root_loads_nothing_heavy():
    probe = (
        "import sys, wafersim.wafer, wafersim.fabric, wafersim.kernels, wafersim.compiler\n"
        "import wafersim.memoryx, wafersim\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numba', 'numpy', 'h5py'}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=120)  # fmt: skip
    assert done.stdout.strip() == "[]"


def test_root_docstring_examples_run():
    import doctest

    from wafersim.kernels import tiers

    import wafersim
    from wafersim import wafer

    for module in (wafer, wafersim, tiers):
        assert doctest.testmod(module).failed == 0
