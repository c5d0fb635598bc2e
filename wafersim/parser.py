"""The ``wafersim`` argument parser: the subcommands of :mod:`wafersim.jobs` and the options
every one of them takes (:mod:`wafersim.options`)."""

from __future__ import annotations

import argparse
from typing import NoReturn

from wafer import __version__
from wafersim.jobs import JOBS, command
from wafersim.options import add_common_options

DESCRIPTION = "wafersim: a cycle-approximate simulator of a wafer-scale accelerator"


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line, like every other error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"wafersim: error: {message} (see --help)\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole CLI, or with ``only`` the options of that subcommand alone (the others are
    listed with their help line but take no options, and ``only=""`` gives none its options):
    ``wafersim --help``, each command and a sweep worker import only the job they need."""
    parser = _Parser(prog="wafersim", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"wafersim {__version__}")
    subs = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, job in JOBS.items():
        sub = subs.add_parser(name, help=job.help, description=job.help)
        if only is None or name == only:
            command(name).add_arguments(sub)
            add_common_options(sub)
    return parser
