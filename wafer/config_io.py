"""Reading specs from YAML/TOML files and ``key=value`` overrides."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import DEFAULT_PRESET, preset
from wafersim.wafer.spec import WaferSpec, spec_from_dict


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
        return yaml.safe_load(text)
    except RecursionError:
        raise ConfigError(f"{path}: cannot parse: nested too deeply") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        where = f"{mark.line + 1}:{mark.column + 1}" if mark else "?:?"
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigError(f"{path}:{where}: cannot parse: {problem}") from None


def _yaml() -> Any:
    try:
        import yaml
    except ImportError:
        raise ConfigError("reading YAML needs PyYAML: pip install 'wafersim[yaml]'") from None
    return yaml


def parse_value(text: str) -> Any:
    """``"64"`` -> 64, ``"1e-3"`` -> 0.001, ``"true"`` -> True, anything else stays text."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
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
