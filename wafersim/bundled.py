"""The examples shipped inside the package (``wafersim.examples``): each command that reads
a file of one kind (a run config, a model, a sweep) also takes the name of a bundled one, so
that the guide's commands work after ``pip install`` from any folder."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from wafersim.wafer.errors import ConfigError

# a kind of file -> the folder of the bundled ones, relative to the examples' root
KINDS = {"run": ".", "model": "models", "sweep": "sweeps"}
SUFFIXES = (".yaml", ".yml", ".toml")


def examples_root() -> Path:
    """The folder of the bundled examples, wherever the package is installed."""
    spec = importlib.util.find_spec("wafersim.examples")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the bundled examples (wafersim.examples) are not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def bundled(kind: str) -> dict[str, Path]:
    """The bundled files of ``kind`` by name (the file name without its suffix)."""
    folder = examples_root() / KINDS[kind]
    return {p.stem: p for p in sorted(folder.iterdir()) if p.suffix in SUFFIXES}


def resolve(kind: str, text: str) -> str:
    """``text`` as given where it names a file, else the path of the bundled ``kind`` of
    that name; ConfigError naming both places otherwise."""
    if Path(text).exists():
        return text
    found = bundled(kind)
    name = Path(text).stem if Path(text).parent == Path(".") else None
    if name in found:
        return str(found[name])
    raise ConfigError(
        f"no such file: {text} (nor a bundled {kind} file of that name; "
        f"`wafersim examples` lists them: {', '.join(found)})"
    )


def example(kind: str, name: str = "") -> Path:
    """The bundled ``kind`` file ``name`` (``kind`` one of :data:`KINDS`, or ``algorithms``),
    or with no name the folder of that kind, for scripts that run from any folder."""
    folder = examples_root() / KINDS.get(kind, kind)
    if not name:
        return folder
    return Path(resolve(kind, name)) if kind in KINDS else folder / name


def path_of(kind: str):
    """An argparse ``type`` that resolves a ``kind`` file's path or bundled name."""

    def parse(text: str) -> str:
        try:
            return resolve(kind, text)
        except ConfigError as error:
            import argparse

            raise argparse.ArgumentTypeError(str(error)) from None

    parse.__name__ = f"{kind} file"
    return parse


def copy_examples(target: str | Path) -> list[Path]:
    """Copy every bundled example into ``target`` (created; refused where a file would be
    overwritten, so a copy never replaces a user's edits)."""
    root, target = examples_root(), Path(target)
    files = [p.relative_to(root) for p in sorted(root.rglob("*")) if _shipped(p, root)]
    clashes = [target / p for p in files if (target / p).exists()]
    if clashes:
        raise ConfigError(f"--copy {target}: {clashes[0]} exists (and {len(clashes) - 1} more); "
                          "copy into an empty folder")  # fmt: skip
    for path in files:
        (target / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / path, target / path)
    return [target / p for p in files]


def _shipped(path: Path, root: Path) -> bool:
    """A file the package ships (not the package's own __init__ or a byte-code cache)."""
    parts = path.relative_to(root).parts
    return path.is_file() and "__pycache__" not in parts and parts != ("__init__.py",)
