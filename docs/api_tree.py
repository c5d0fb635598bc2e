"""MkDocs hook: the API reference reads the source as installed (``wafersim.wafer``, ...),
while the layers' folders sit at the repository's root; so a tree of links in the installed
shape is made under build/ for mkdocstrings to read, without importing anything. mypy reads
the same tree (``mypy_path`` in pyproject.toml): ``python docs/api_tree.py`` makes it alone,
without MkDocs."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "api_tree"

try:
    from mkdocs.plugins import event_priority
except ImportError:  # run as a script for mypy, where the docs extra may be missing

    def event_priority(priority: int):
        return lambda hook: hook


def package_dirs(root: Path) -> dict[str, str]:
    """The folders a checkout installs as packages (``[tool.setuptools.package-dir]`` of its
    pyproject.toml: package -> folder), empty where it maps none."""
    config = tomllib.loads((root / "pyproject.toml").read_text())
    return config.get("tool", {}).get("setuptools", {}).get("package-dir", {})


def link_tree(root: Path = ROOT, tree: Path = TREE) -> Path:
    """Link the checkout ``root``'s packages into ``tree`` in their installed shape (a folder
    installed as itself: its entries; a folder mapped into a package: the folder); returns
    ``tree``."""
    for package, folder in sorted(package_dirs(root).items()):  # "wafersim" before its own
        source, place = root / folder, tree.joinpath(*package.split("."))
        if package == folder:
            place.mkdir(parents=True, exist_ok=True)
            links = {p.name: p for p in source.iterdir() if p.name != "__pycache__"}
            for name, target in links.items():
                _link(place / name, target)
        else:
            place.parent.mkdir(parents=True, exist_ok=True)
            _link(place, source)
    return tree


def _link(link: Path, target: Path) -> None:
    """``link`` points at ``target`` (made again where it pointed elsewhere)."""
    if link.is_symlink() and link.resolve() == target.resolve():
        return
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target, target_is_directory=target.is_dir())


@event_priority(100)  # before mkdocstrings fixes its search paths (a missing one is dropped)
def on_config(config, **kwargs):
    """Make the tree before mkdocstrings reads it."""
    link_tree()
    return config


if __name__ == "__main__":
    link_tree()
