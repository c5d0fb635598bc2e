"""Reading specs from YAML/TOML files and ``key=value`` overrides."""

from __future__ import annotations

import functools
import re
import tomllib
from pathlib import Path
from typing import Any

from wafersim.wafer.errors import ConfigError, excerpt
from wafersim.wafer.presets import DEFAULT_PRESET, preset
from wafersim.wafer.spec import WaferSpec, spec_from_dict

MAX_YAML_NODES = 1_000_000  # nodes a YAML document may hold once its aliases are expanded
_MERGE_TAG = "tag:yaml.org,2002:merge"
_INTEGER = re.compile(r"[+-]?[0-9]+")


def exists(path: Path, folder: bool = False) -> bool:
    """Whether ``path`` is a file (or with ``folder`` a folder); a name the file system
    refuses (too long) is none, not an OSError."""
    try:
        return path.is_dir() if folder else path.is_file()
    except OSError:
        return False


def load_mapping(path: str | Path) -> dict[str, Any]:
    """Read a ``.toml``, ``.yaml`` or ``.yml`` file holding one table."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no such file: {path}")
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml"):
        raise ConfigError(f"{path}: unknown file type {suffix!r}; use .toml, .yaml or .yml")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read: {error}") from None
    data = _parse_toml(path, text) if suffix == ".toml" else _parse_yaml(path, text)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a table of keys at the top level")
    return data


def _parse_toml(path: Path, text: str) -> Any:
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise ConfigError(f"{path}: cannot parse: nested too deeply") from None
    except tomllib.TOMLDecodeError as error:  # "... (at line L, column C)" or "(at end ...)"
        found = re.search(r"\(at line (\d+), column (\d+)\)", str(error))
        where = ":".join(found.groups()) if found else f"{text.count(chr(10)) + 1}:end"
        message = str(error).partition(" (at ")[0]
        raise ConfigError(f"{path}:{where}: cannot parse: {message}") from None


def _parse_yaml(path: Path, text: str) -> Any:
    yaml = _yaml()
    try:
        return load_yaml(text)
    except RecursionError:
        raise ConfigError(f"{path}: cannot parse: nested too deeply") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        where = f"{mark.line + 1}:{mark.column + 1}" if mark else "?:?"
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigError(f"{path}:{where}: cannot parse: {problem}") from None


def load_yaml(text: str) -> Any:
    """The one YAML reader: safe tags only, no duplicate keys, and a bounded alias expansion,
    so that a hostile file is refused instead of silently losing a key or hanging."""
    return _yaml().load(text, Loader=_safe_loader())


def _yaml() -> Any:
    try:
        import yaml
    except ImportError:
        raise ConfigError("reading YAML needs PyYAML: pip install 'wafersim[yaml]'") from None
    return yaml


@functools.cache
def _safe_loader() -> type:
    """PyYAML's SafeLoader, checking each document's size and each mapping's keys first."""
    yaml = _yaml()
    base: Any = yaml.SafeLoader  # PyYAML is optional: its classes are Any to a type checker

    class SafeLoader(base):
        def construct_document(self, node: Any) -> Any:
            _check_expansion(node, yaml.constructor.ConstructorError)
            return super().construct_document(node)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            _check_duplicates(self, node, yaml.constructor.ConstructorError)
            return super().construct_mapping(node, deep)

    return SafeLoader


def _check_duplicates(loader: Any, node: Any, error: type) -> None:
    """Refuse a mapping that names a key twice: YAML keeps the last one silently."""
    seen: dict[Any, Any] = {}
    for key_node, _value in node.value:
        if key_node.tag == _MERGE_TAG:
            continue  # "<<: *base" merges keys, which the mapping's own keys override
        key = loader.construct_object(key_node)
        try:
            first = seen.setdefault(key, key_node)
        except TypeError:
            continue  # an unhashable key: SafeLoader refuses it itself
        if first is not key_node:
            lines = f"{first.start_mark.line + 1} and {key_node.start_mark.line + 1}"
            raise error(None, None, f"duplicate key {excerpt(key)} at lines {lines}",
                        key_node.start_mark)  # fmt: skip


def _check_expansion(root: Any, error: type) -> None:
    """Refuse a document whose aliases expand past :data:`MAX_YAML_NODES` nodes (a
    billion-laughs file is small text but a huge value), or that holds itself."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, finished = stack.pop()
        if finished:
            total = 1 + sum(sizes[id(child)] for child in _children(node))
            sizes[id(node)] = min(total, MAX_YAML_NODES + 1)
            on_path.discard(id(node))
        elif id(node) in on_path:
            raise error(None, None, "an alias refers to a node that holds it", node.start_mark)
        elif id(node) not in sizes:
            on_path.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in _children(node))
    if sizes[id(root)] > MAX_YAML_NODES:
        raise error(None, None, f"its aliases expand it past {MAX_YAML_NODES:,} nodes, the "
                    "most a YAML file may hold", root.start_mark)  # fmt: skip


def _children(node: Any) -> list[Any]:
    """The nodes directly inside a YAML node (a mapping's keys and values)."""
    if isinstance(node.value, str):
        return []
    return [part for item in node.value for part in (item if isinstance(item, tuple) else [item])]


def parse_value(text: str) -> Any:
    """``"64"`` -> 64, ``"1e-3"`` -> 0.001, ``"true"`` -> True, anything else stays text.

    Numbers are ASCII only: Python's ``int`` and ``float`` also read other scripts' digits
    and ``1_000``, which would let text that looks like no number set one."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if _INTEGER.fullmatch(text.strip()):
        return int(text)
    if text.isascii() and "_" not in text:
        try:
            return float(text)
        except ValueError:
            pass
    return text


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["pe.sram_bytes=65536"]`` -> ``{"pe.sram_bytes": 65536}``."""
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} must look like key=value")
        overrides[key.strip()] = parse_value(value.strip())
    return overrides


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"pe": {"sram_bytes": 1}}`` -> ``{"pe.sram_bytes": 1}``."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def load_spec(path: str | Path) -> WaferSpec:
    """A spec file is either a whole spec, or ``preset = "NAME"`` plus keys to change."""
    data = load_mapping(path)
    if "preset" not in data:
        return spec_from_dict(data)
    base = preset(str(data.pop("preset")))
    return base.replace(flatten(data))


def resolve_spec(
    preset_name: str | None, spec_file: str | None, overrides: dict[str, Any]
) -> WaferSpec:
    """The spec a command asked for: a preset or a file, then ``key=value`` overrides."""
    if preset_name and spec_file:
        raise ConfigError("give either --preset or --spec, not both")
    base = load_spec(spec_file) if spec_file else preset(preset_name or DEFAULT_PRESET)
    return base.replace(overrides) if overrides else base
