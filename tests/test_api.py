"""The public API: package roots export what a script needs, lazily."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
import tomllib
import types
from pathlib import Path

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


def type_checking_imports(path: str) -> dict[str, str]:
    """Name -> module of the imports in the top-level ``if TYPE_CHECKING:`` block of the
    file at ``path``, each ``from module import name as name``."""
    found = {}
    for node in ast.parse(Path(path).read_text()).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
                for alias in statement.names:
                    assert alias.asname == alias.name, ast.unparse(statement)  # a re-export
                    assert statement.module is not None
                    found[alias.name] = statement.module
    return found


@pytest.mark.parametrize("root", ROOTS)
def test_type_checkers_see_every_export_from_its_module(root):
    """The root's TYPE_CHECKING imports (what mypy and IDEs read) name the same names from
    the same modules as its EXPORTS (what runs), so the two cannot drift apart."""
    package = importlib.import_module(root)
    assert type_checking_imports(package.__file__) == package.EXPORTS


def test_mypy_checks_the_roots_and_the_modules_they_export_from():
    """pyproject.toml's [tool.mypy] modules are the public API: every package root and every
    module an EXPORTS entry names, and nothing else."""
    config = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    public = set(ROOTS)
    for root in ROOTS:
        public |= set(importlib.import_module(root).EXPORTS.values())
    assert sorted(config["tool"]["mypy"]["modules"]) == sorted(public)


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
