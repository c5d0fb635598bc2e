"""Sweep files: a base job, the axes to vary and the metrics to keep, expanded into points.

A sweep file (YAML or TOML) holds::

    job: defects                 # defects | traffic | kernel | compile | run
    base: {preset: wse2}         # options (by dest name) and key=value spec overrides
    sampling: grid               # grid (cartesian) | list (zipped) | random
    axes: {defect_density_per_cm2: [0.05, 0.1], repair: [row, column_shift], seed: [0, 1]}
    metrics: [working_pes, unrepaired_pes]

``axes`` may also be a list of such tables, *panels* expanded one by one (each with the
sampling) and run one after the other: a study of defect density and one of the dead-PE
fraction in one file, say, or a model crossed with the settings that go with it.

A key that is an option of the job (``defect_density_per_cm2`` or ``--defect-density-per-cm2``)
becomes that option; any other key is a spec override (``pe.sram_bytes: 65536``), or for
``run`` a run-config override (``batch: 8``, ``wafer.defects.seed: 3``). ``base`` may
also hold ``args``, raw positional arguments (the kernel name for ``kernel``). With ``random``
sampling, ``samples`` points are drawn with ``sample_seed``; an axis is then a list to choose
from or ``{uniform: [lo, hi]}``, ``{loguniform: [lo, hi]}`` or ``{integers: [lo, hi]}``. A
sweep holds at most :data:`MAX_POINTS` points, all panels together, counted from the axes'
lengths before any point is made.

A value that names an input file (``args`` of ``run`` and ``compile``, ``spec``, ``defects``,
``defect_list``, and for ``run`` the run-config keys ``model``, ``data.path`` and
``wafer.defects.path``) is read relative to the sweep file's folder, as a run config's
``model`` is relative to the config: a sweep runs the same from any working directory. Points
keep the values as written; their argv holds the absolute paths, checked to exist up front.

Each point's argv (the line a user would type for it) is parsed once, here, by the CLI's own
parser: a bad value is refused before anything runs with the CLI's own message, and the point
holds its job as a :class:`~wafersim.commands.jobs.JobCall`, the job's typed options, which
the sweep runs (in-process or on a Dask worker, sent as it is) with no parsing left. Its
metrics are :class:`~wafersim.sweeps.metrics.Metric` records, each name checked here against
what the job's result can hold.

A sweep's identity is its file's bytes and the bytes of every file its points read
(:attr:`SweepConfig.inputs`): those named above and, for ``run``, the files each point's run
config names once its overrides are set (the model, a defect list, a data set's files:
:func:`memoryx.run_config.named_files`). A results table keeps them all, so resuming after any
of them changed is refused, naming the file. Points never write files of their own (an output
option is refused); ``run`` points write their default output folder, and two points that
would write the same one are refused before the sweep starts.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import io
import itertools
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from wafersim.commands.jobs import JobCall, command
from wafersim.commands.options import add_engine_option
from wafersim.commands.parser import build_parser, parse_command_line
from wafersim.sweeps.metrics import Metric, job_metrics
from wafersim.wafer.config_io import flatten, load_mapping, parse_overrides
from wafersim.wafer.errors import ConfigError, excerpt

JOBS = ("defects", "traffic", "kernel", "compile", "run")
CONFIG_JOBS = ("run",)  # their key=value overrides set run-config keys, not spec keys
SAMPLINGS = ("grid", "list", "random")
DISTRIBUTIONS = ("uniform", "loguniform", "integers")
TOP_KEYS = ("job", "base", "sampling", "axes", "samples", "sample_seed", "metrics")
RAW_ARGS_KEY = "args"
# Keys that name an input file, read relative to the sweep file's folder: options of the jobs,
# the jobs whose positional argument is a file (a run config, a model), run-config keys.
PATH_OPTIONS = ("spec", "defects", "defect_list")
PATH_ARGS_JOBS = {"run": "config", "compile": "model"}  # job -> its file argument's dest
PATH_CONFIG_KEYS = ("model", "data.path", "wafer.defects.path")
# Points a sweep expands to at most, all panels together: each is parsed and kept in memory
# before the first runs, and a results table holds a row per point
MAX_POINTS = 100_000
INT64 = (-(2**63), 2**63 - 1)  # bounds of an ``integers`` axis: numpy draws int64
KEY_CHARS = 100  # characters of a key in base or axes at most: longer ones name nothing
ARGV_CHARS = 50  # characters of a point's argv an error about it quotes at most
MESSAGE_CHARS = 160  # characters of a point's parser message an error quotes at most
PARSER_PREFIX = re.compile(r"^[\w ]+: error: ")  # how argparse starts a usage error


@dataclass(frozen=True)
class SweepPoint:
    """One run of the job: its index, its config as written, the command line a user would
    type for it, and that line parsed into the job's typed options (what runs)."""

    index: int
    config: dict[str, Any]
    argv: tuple[str, ...]
    job: JobCall

    def config_json(self) -> str:
        return json.dumps(self.config, sort_keys=True)


@dataclass(frozen=True)
class SweepConfig:
    """A validated sweep file; ``points`` is the expanded list of runs."""

    path: str
    sha256: str  # the sweep file's bytes
    job: str
    base: dict[str, Any]
    sampling: str
    axes: dict[str, Any]
    samples: int | None
    sample_seed: int
    metrics: tuple[Metric, ...]
    points: tuple[SweepPoint, ...]
    inputs: tuple[tuple[str, str], ...] = ()  # (path from the sweep's folder, its SHA-256)

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The metrics' names as the file gives them: the results table's columns."""
        return tuple(metric.name for metric in self.metrics)

    def to_dict(self) -> dict[str, Any]:
        """The file's content as read (what the hash stands for), JSON-ready."""
        return {
            "job": self.job,
            "base": self.base,
            "sampling": self.sampling,
            "axes": self.axes,
            "samples": self.samples,
            "sample_seed": self.sample_seed,
            "metrics": list(self.metric_names),
        }


def load_sweep(path: str | Path) -> SweepConfig:
    """Read, validate and expand a sweep file; every problem is a one-line ConfigError."""
    path = Path(path)
    data = load_mapping(path)
    try:
        return _build(path, data)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None


def _build(path: Path, data: dict[str, Any]) -> SweepConfig:
    unknown = sorted(set(map(str, data)) - set(TOP_KEYS))
    if unknown:
        raise ConfigError(f"unknown key {excerpt(unknown[0])}; allowed: {', '.join(TOP_KEYS)}")
    job = _choice("job", data.get("job"), JOBS)
    sampling = _choice("sampling", data.get("sampling", "grid"), SAMPLINGS)
    base = _mapping("base", data.get("base", {}))
    axes = data.get("axes")
    panels = _panels(axes)
    samples = _samples(sampling, data.get("samples"))
    sample_seed = _int("sample_seed", data.get("sample_seed", 0), minimum=0)
    names = _metrics(data.get("metrics"))
    options = job_options(job)
    for panel in panels:
        _check_keys(job, base, panel, options)
    check_point_count(sampling, panels, samples)
    values = []
    for panel in panels:
        values += _axis_values(sampling, panel, samples, sample_seed)
    folder = path.parent.resolve()
    lines = [_point_argv(job, base, v, options, folder) for v in values]
    points = tuple(
        SweepPoint(i, {"job": job, **base, **v}, argv, JobCall(job, parse_point_args(argv)))
        for i, (v, argv) in enumerate(zip(values, lines, strict=True))
    )
    check_outputs(job, points)
    return SweepConfig(
        path=str(path),
        sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        job=job,
        base=base,
        sampling=sampling,
        axes=cast(dict[str, Any], axes),  # a table: _panels refuses anything else
        samples=samples,
        sample_seed=sample_seed,
        metrics=job_metrics(job, names),
        points=points,
        inputs=input_digests(job, [point.job.options for point in points], folder),
    )


def _panels(axes: Any) -> list[dict[str, Any]]:
    """The axes as a list of panels: one table, or a non-empty list of them."""
    tables = axes if isinstance(axes, list) and axes else [axes]
    panels = []
    for i, table in enumerate(tables):
        field = "axes" if len(tables) == 1 and not isinstance(axes, list) else f"axes[{i}]"
        panel = _mapping(field, table)
        if not panel:
            raise ConfigError(f"{field}={{}} must name at least one key to vary")
        panels.append(panel)
    return panels


def _choice(field: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ConfigError(f"{field}={excerpt(value)} is not allowed; allowed: {', '.join(allowed)}")
    return value


def _mapping(field: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{field}={excerpt(value)} must be a table of key: value")
    return dict(value)


def _int(field: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{field}={excerpt(value)} must be an integer >= {minimum}")
    return value


def _samples(sampling: str, value: Any) -> int | None:
    if sampling == "random":
        return _int("samples", value, minimum=1)
    if value is not None:
        raise ConfigError(f"samples={excerpt(value)} is only allowed with sampling: random")
    return None


def _metrics(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"metrics={excerpt(value)} must be a non-empty list of result keys")
    for name in value:
        if not isinstance(name, str) or not name or "/" in name:
            raise ConfigError(f"metrics entry {excerpt(name)} must be a result key (text, no '/')")
    if len(set(value)) != len(value):
        raise ConfigError(f"metrics={excerpt(value)} names a key twice")
    return tuple(value)


def job_options(job: str) -> dict[str, argparse.Action]:
    """The job's command-line options by dest name (``--seed`` included)."""
    parser = argparse.ArgumentParser(add_help=False)
    chosen = command(job)
    chosen.add_arguments(parser)
    parser.add_argument("--seed", type=int)
    if chosen.engine:
        add_engine_option(parser)
    return {a.dest: a for a in parser._actions if a.option_strings}


def _option_name(key: str) -> str:
    return key.removeprefix("--").replace("-", "_")


def _spec_keys() -> set[str]:
    from wafersim.wafer.presets import preset

    return set(flatten(preset("tiny").to_dict()))


def _run_config_keys() -> set[str]:
    from wafersim.memoryx.run_config import DEFAULTS

    return {"model", *DEFAULTS}


def _check_keys(job: str, base: dict, axes: dict, options: dict[str, argparse.Action]) -> None:
    _check_key_lengths(base, axes)
    spec_keys = _spec_keys()
    config_keys = _run_config_keys() if job in CONFIG_JOBS else set()
    for field, table in (("base", base), ("axes", axes)):
        for key in table:
            name = _option_name(str(key))
            if field == "base" and key == RAW_ARGS_KEY:
                continue
            if name in command(job).outputs:
                raise ConfigError(f"{field}.{key}: points cannot write files; drop this option")
            if job in CONFIG_JOBS:
                if name not in options and str(key).split(".")[0] not in config_keys:
                    allowed = ", ".join(sorted(options) + sorted(config_keys))
                    raise ConfigError(
                        f"{field}.{key} is neither an option of the job nor a run-config key "
                        f"(dotted keys below them are allowed); allowed: {allowed}"
                    )
            elif name not in options and key not in spec_keys:
                allowed = ", ".join(sorted(options) + sorted(spec_keys))
                raise ConfigError(
                    f"{field}.{key} is neither an option of the job nor a spec key; "
                    f"allowed: {allowed}"
                )
    both = sorted(set(map(_option_name, base)) & set(map(_option_name, axes)))
    if both:
        raise ConfigError(f"{excerpt(both[0])} is in both base and axes; keep it in one")


def check_point_count(sampling: str, panels: list[dict], samples: int | None) -> None:
    """ConfigError, before any point is made, when the panels expand to more than
    :data:`MAX_POINTS` points: eight axes of ten values are a hundred million points."""
    total = sum(_panel_points(sampling, panel, samples) for panel in panels)
    if total > MAX_POINTS:
        raise ConfigError(
            f"the sweep expands to {total:,} points ({sampling} sampling); allowed: at most "
            f"{MAX_POINTS:,} (wafersim.sweeps.config.MAX_POINTS): fewer values or axes"
        )


def _panel_points(sampling: str, axes: dict, samples: int | None) -> int:
    """Points one panel expands to, counted without expanding it (``list``: its longest axis,
    the zip checks their lengths)."""
    if sampling == "random":
        assert samples is not None  # _samples requires it for random sampling
        return samples
    lengths = [len(values) if isinstance(values, list) else 1 for values in axes.values()]
    return math.prod(lengths) if sampling == "grid" else max(lengths)


def _check_key_lengths(base: dict, axes: dict) -> None:
    """No option, spec key or run-config key is longer than :data:`KEY_CHARS`, so a longer key
    is refused here, and every later message that names a key stays short."""
    for field, table in (("base", base), ("axes", axes)):
        for key in table:
            if len(str(key)) > KEY_CHARS:
                raise ConfigError(f"{field} key {excerpt(str(key))} is longer than any option "
                                  f"or config key ({KEY_CHARS} characters at most)")  # fmt: skip


def _axis_values(sampling: str, axes: dict, samples: int | None, seed: int) -> list[dict]:
    if sampling == "random":
        assert samples is not None  # _samples requires it for random sampling
        return _random_values(axes, samples, seed)
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"axes.{key}={excerpt(values)} must be a non-empty list of values")
    keys = list(axes)
    if sampling == "grid":
        return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*axes.values())]
    lengths = {key: len(values) for key, values in axes.items()}
    if len(set(lengths.values())) > 1:
        raise ConfigError(f"sampling: list zips the axes, so they need one length; got {lengths}")
    return [dict(zip(keys, combo, strict=True)) for combo in zip(*axes.values(), strict=True)]


def _random_values(axes: dict, samples: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    draws = {key: _draw(key, spec, samples, rng) for key, spec in axes.items()}
    return [{key: draws[key][i] for key in axes} for i in range(samples)]


def _draw(key: str, spec: Any, samples: int, rng: np.random.Generator) -> list[Any]:
    if isinstance(spec, list) and spec:
        return [spec[i] for i in rng.integers(0, len(spec), size=samples)]
    if not (isinstance(spec, dict) and len(spec) == 1 and next(iter(spec)) in DISTRIBUTIONS):
        raise ConfigError(
            f"axes.{key}={excerpt(spec)} must be a list or one of "
            f"{{{', '.join(DISTRIBUTIONS)}: [lo, hi]}}"
        )
    kind, bounds = next(iter(spec.items()))
    lo, hi = _bounds(f"axes.{key}.{kind}", kind, bounds)
    if kind == "integers":
        return [int(v) for v in rng.integers(int(lo), int(hi) + 1, size=samples)]
    if kind == "loguniform":
        return [float(v) for v in np.exp(rng.uniform(np.log(lo), np.log(hi), size=samples))]
    return [float(v) for v in rng.uniform(lo, hi, size=samples)]


def _bounds(field: str, kind: str, bounds: Any) -> tuple[float, float]:
    """``[lo, hi]`` of a distribution, lo <= hi, in the range numpy draws from: int64 for
    ``integers``, a finite width for ``uniform``, above 0 for ``loguniform``."""
    ok = isinstance(bounds, list) and len(bounds) == 2 and all(_is_number(b) for b in bounds)
    if not ok or not bounds[0] <= bounds[1]:
        raise ConfigError(f"{field}={excerpt(bounds)} must be [lo, hi] with lo <= hi")
    lo, hi = bounds
    if kind == "integers" and not INT64[0] <= lo <= hi < INT64[1]:
        raise ConfigError(f"{field}={excerpt(bounds)} must lie in [-2^63, 2^63 - 2]")
    if kind != "integers" and not _finite_width(lo, hi):
        raise ConfigError(f"{field}={excerpt(bounds)} must be finite numbers, hi - lo finite")
    if kind == "loguniform" and lo <= 0:
        raise ConfigError(f"{field}={excerpt(bounds)} must be above 0 (loguniform)")
    return lo, hi


def _finite_width(lo: float, hi: float) -> bool:
    """Whether ``hi - lo`` is a finite float (an integer too large for a float is not)."""
    try:
        return math.isfinite(float(hi) - float(lo))
    except OverflowError:
        return False


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _point_argv(job: str, base: dict, values: dict, options: dict, folder: Path):
    """A point's argv (base and its axis values), its input files made absolute."""
    table = {
        **_resolve_paths(job, "base", base, options, folder),
        **_resolve_paths(job, "axes", values, options, folder),
    }
    return point_argv(job, table, options)


def _resolve_paths(job: str, field: str, table: dict, options: dict, folder: Path) -> dict:
    """``table`` with every value that names an input file (see the module docstring) made
    absolute against ``folder``, the sweep file's: relative to the working directory, a sweep
    run from elsewhere failed every point on a missing file."""
    return {
        key: _resolve_value(job, f"{field}.{key}", str(key), value, options, folder)
        for key, value in table.items()
    }


def _resolve_value(job: str, field: str, key: str, value: Any, options: dict, folder: Path):
    name = _option_name(key)
    if key == RAW_ARGS_KEY:
        if job not in PATH_ARGS_JOBS:
            return value  # a kernel's name, not a file
        if isinstance(value, list):
            return [_input_path(f"{field}[{i}]", v, folder) for i, v in enumerate(value)]
        return _input_path(field, value, folder)
    if name in options:
        return _input_path(field, value, folder) if name in PATH_OPTIONS else value
    if job in CONFIG_JOBS:
        return _resolve_config(field, key, value, folder)
    return value


def _resolve_config(field: str, key: str, value: Any, folder: Path) -> Any:
    """A run-config override, its file-naming keys resolved, in nested tables too."""
    if key in PATH_CONFIG_KEYS:
        return _input_path(field, value, folder)
    if isinstance(value, dict):
        return {
            sub: _resolve_config(f"{field}.{sub}", f"{key}.{sub}", v, folder)
            for sub, v in value.items()
        }
    return value


def _input_path(field: str, value: Any, folder: Path) -> Any:
    """``value`` as an absolute path from ``folder``; ConfigError naming the field when no
    such file or folder exists (a value that is not text is left to the job to refuse)."""
    if not isinstance(value, str) or not value:
        return value
    try:
        path = (folder / value).resolve()
        found = path.exists()
    except OSError as error:  # a name too long, a loop of links
        raise ConfigError(f"{field}={excerpt(value)}: {error.strerror or error}") from None
    if not found:
        raise ConfigError(
            f"{field}={excerpt(value)}: no such file {_clipped(str(path))} (a relative path is "
            "read from the sweep file's folder)"
        )
    return str(path)


def input_digests(job: str, parsed: list[argparse.Namespace], folder: Path) -> tuple:
    """``(path, SHA-256)`` of every file the points read, the path relative to the sweep
    file's ``folder`` (a project folder moved whole resumes), sorted by path."""
    from wafersim.memoryx.run_config import file_sha256

    files = {path for args in parsed for path in point_files(job, args)}
    digests = {os.path.relpath(path, folder): file_sha256(path) for path in files}
    return tuple(sorted(digests.items()))


def point_files(job: str, args: argparse.Namespace) -> list[Path]:
    """The files one point reads: its input options, its file argument, and for ``run`` the
    files its run config names (:func:`memoryx.run_config.config_files`)."""
    names = [getattr(args, name, None) for name in PATH_OPTIONS]
    names.append(getattr(args, PATH_ARGS_JOBS[job]) if job in PATH_ARGS_JOBS else None)
    files = [Path(name).resolve() for name in names if isinstance(name, str) and name]
    if job in CONFIG_JOBS:
        from wafersim.memoryx.run_config import config_files

        files += config_files(args.config, parse_overrides(args.overrides))
    return [path for path in files if path.is_file()]


def check_outputs(job: str, points: tuple[SweepPoint, ...]) -> None:
    """ConfigError, before any point runs, when two points would write one output (two
    ``run`` points of one config share a default folder): parallel points would write it
    together, and the folder would hold one's results under the other's config."""
    writers: dict[Path, int] = {}
    for point in points:
        for option, name in command(job).written(point.job.options).items():
            target = Path(name).resolve()
            if target in writers:
                raise ConfigError(
                    f"points {writers[target]} and {point.index} would both write {name} "
                    f"({job} --{option.replace('_', '-')}); make the points differ in a key "
                    "that changes the job's config"
                )
            writers[target] = point.index


def point_argv(job: str, table: dict[str, Any], options: dict) -> tuple[str, ...]:
    """``[job, options..., "--", args..., key=value...]`` (``--`` only before positional
    arguments), as a user would type it."""
    argv, positional, overrides = [job], [], []
    for key, value in table.items():
        name = _option_name(str(key))
        if job in CONFIG_JOBS and name == "seed":  # a run's seed is a config key
            overrides.append(f"seed={value}")
        elif key == RAW_ARGS_KEY:
            positional += [str(v) for v in (value if isinstance(value, list) else [value])]
        elif name in options:
            argv += _option_argv(options[name], value)
        else:
            overrides.append(f"{key}={value}")
    return (*argv, *(["--", *positional] if positional else []), *overrides)


def _option_argv(action: argparse.Action, value: Any) -> list[str]:
    flag = action.option_strings[-1]
    if action.nargs == 0:
        if not isinstance(value, bool):
            raise ConfigError(
                f"{flag} is a switch; its value must be true or false, got {excerpt(value)}"
            )
        return [flag] if value else []
    if isinstance(value, list):
        if action.nargs not in ("+", "*"):
            raise ConfigError(f"{flag} takes one value, got the list {excerpt(value)}")
        return [flag, *map(str, value)]
    return [flag, str(value)]


@functools.cache
def cli_parser(job: str) -> argparse.ArgumentParser:
    """The CLI's parser with ``job``'s subcommand alone, built once per process and job
    (building it imports the job's modules: 0.05 s for ``defects``, 0.2 s for all jobs)."""
    return build_parser(only=job)


def parse_point_args(argv: tuple[str, ...]) -> argparse.Namespace:
    """Parse a point's argv with the CLI's own parser (once, when the sweep file loads); a
    usage error is a ConfigError."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return parse_command_line(list(argv), cli_parser(argv[0]))
    except SystemExit:
        message = captured.getvalue().strip().splitlines() or ["cannot parse"]
        reason = PARSER_PREFIX.sub("", message[-1])  # "wafersim: error: ", said once already
        shown = excerpt(" ".join(argv), ARGV_CHARS)
        raise ConfigError(f"point {shown}: {_clipped(reason)}") from None


def _clipped(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, unquoted: a message argparse wrote (it quotes a bad
    value whole) or a path made of one."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
