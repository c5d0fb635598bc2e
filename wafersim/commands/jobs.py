"""The table of ``wafersim`` subcommands: each one's help line and the module that holds it.

A command's module (``wafersim.commands.<name>``, named as the command) defines ``COMMAND``,
a :class:`Command`: how it adds its options to a parser, the job (parsed arguments -> a
JSON-ready dict) and its text output. The table names modules rather than importing them, so
``wafersim --help`` and each command import only what they use, and a command that runs
others (``sweep``) finds them here without the table importing it back.
"""

from __future__ import annotations

import argparse
import copy
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Command:
    """One subcommand: its options, its job and its text output; whether it takes
    ``--seed``, what its ``key=value`` words set (``""``: it takes none), which of its
    options name outputs (option -> ``"file"`` or ``"folder"``), checked before it runs (and
    refused in sweeps), what it writes when such an option is not given
    (``default_outputs``: args -> option -> path), and whether it runs the cycle engine (then
    it takes ``--engine``)."""

    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], dict[str, Any]]
    text: Callable[[dict[str, Any]], str]
    seed: bool = True
    overrides: str = "spec"
    outputs: dict[str, str] = field(default_factory=dict)
    engine: bool = False
    default_outputs: Callable[[argparse.Namespace], dict[str, str]] | None = None

    def written(self, args: argparse.Namespace) -> dict[str, str]:
        """What the job run with ``args`` writes, by output option: the outputs given, and
        where it writes without one (a sweep refuses two points writing one place)."""
        given = {name: getattr(args, name) for name in self.outputs if getattr(args, name, None)}
        defaults = self.default_outputs(args) if self.default_outputs else {}
        return {**defaults, **given}

    def execute(self, args: argparse.Namespace) -> dict[str, Any]:
        """The job, its engine runs on the one ``--engine`` names (checked first: ``cuda``
        with no GPU is one clear error before any work)."""
        if not self.engine:
            return self.run(args)
        from wafersim.fabric.engine import engine_used

        with engine_used(args.engine):
            return self.run(args)


@dataclass(frozen=True)
class JobCall:
    """One run of a subcommand: its name and its options, parsed and converted by the
    subcommand's own parser (numbers as numbers, choices checked, ``key=value`` words in
    ``options.overrides``), so that it runs by calling the job (:meth:`run`) with nothing
    left to parse. It pickles: a sweep sends it as it is to a Dask worker."""

    name: str
    options: argparse.Namespace

    def arguments(self) -> argparse.Namespace:
        """A copy of the options for one run: a job may fill in a default on its options
        (``kernel`` its ``--algo``), and a retried point starts from the options it had."""
        return copy.deepcopy(self.options)

    def run(self) -> dict[str, Any]:
        """The job's JSON-ready result (:meth:`Command.execute`)."""
        return command(self.name).execute(self.arguments())


@dataclass(frozen=True)
class Job:
    """A subcommand's entry in the table: its module in ``wafersim.commands`` and its
    one-line help."""

    module: str
    help: str


JOBS: dict[str, Job] = {
    "presets": Job("presets", "list the built-in wafer presets"),
    "defects": Job(
        "defects",
        "generate a defect map and repair it, or (--study) sweep densities and repairs",
    ),
    "traffic": Job("traffic", "synthetic traffic on the fabric"),
    "kernel": Job("kernel", "run a kernel (GEMM, GEMV, collective) on the cycle engine"),
    "compile": Job("compile", "compile a model into a per-layer placement plan"),
    "run": Job("run", "train (or time) a model on simulated wafers with MemoryX weight streaming"),
    "plot": Job("plot", "plot a sweep's metric against a config key (study plots, PNG)"),
    "sweep": Job(
        "sweep",
        "run a parameter sweep of defects/traffic/kernel/compile/run into one HDF5 table",
    ),
    "examples": Job("examples", "list the bundled run configs, models and sweeps, or copy them"),
}


def command(name: str) -> Command:
    """The subcommand ``name`` (its module is imported now)."""
    return importlib.import_module(f"wafersim.commands.{JOBS[name].module}").COMMAND
