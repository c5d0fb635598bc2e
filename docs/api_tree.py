"""MkDocs hook: the API reference reads the source as installed (``wafersim.wafer``, ...),
while the layers' folders sit at the repository's root; so a tree of links in the installed
shape is made under build/ for mkdocstrings to read, without importing anything. mypy reads
the same tree (``mypy_path`` in pyproject.toml): ``python docs/api_tree.py`` makes it alone,
without MkDocs."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "api_tree"
MAPPED = ("wafer", "fabric", "kernels", "compiler", "memoryx", "examples")

try:
    from mkdocs.plugins import event_priority
except ImportError:  # run as a script for mypy, where the docs extra may be missing

    def event_priority(priority: int):
        return lambda hook: hook


def link_tree() -> Path:
    """Link wafersim/'s entries and the mapped folders into build/api_tree/wafersim; returns
    the tree's root."""
    package = TREE / "wafersim"
    package.mkdir(parents=True, exist_ok=True)
    entries = {p.name: p for p in (ROOT / "wafersim").iterdir() if p.name != "__pycache__"}
    entries.update({name: ROOT / name for name in MAPPED})
    for name, target in entries.items():
        link = package / name
        if link.is_symlink() and link.resolve() == target.resolve():
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target, target_is_directory=target.is_dir())
    return TREE


@event_priority(100)  # before mkdocstrings fixes its search paths (a missing one is dropped)
def on_config(config, **kwargs):
    """Make the tree before mkdocstrings reads it."""
    link_tree()
    return config


if __name__ == "__main__":
    link_tree()
