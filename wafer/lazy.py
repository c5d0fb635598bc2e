"""Package roots that export their public names lazily: ``import wafersim`` (or ``fabric``,
...) loads nothing until a name is used, then only the module that defines it."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(
    package: str, names: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for the package ``package`` whose public ``names``
    (name -> the module defining it) are imported on first use."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(names[name]), name)

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__
