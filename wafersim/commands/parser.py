"""The ``wafersim`` argument parser: the subcommands of :mod:`wafersim.commands.jobs` and the
options every one of them takes (:mod:`wafersim.commands.options`)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from wafersim.commands.jobs import JOBS, command
from wafersim.commands.options import add_common_options, split_overrides
from wafersim.wafer import __version__

DESCRIPTION = "wafersim: a cycle-approximate simulator of a wafer-scale accelerator"


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line, like every other error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"wafersim: error: {message} (see --help)\n")


class _Version(argparse.Action):
    """``--version``: wafersim's version, Numba's and the patches of Numba that apply to it
    (``fabric.numba_compat``), read from the packages' metadata: nothing of Numba is imported."""

    def __call__(self, parser, namespace, values, option_string=None):
        from wafersim.fabric.numba_compat import describe

        sys.stdout.write(f"wafersim {__version__} ({describe()})\n")
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole CLI, or with ``only`` the options of that subcommand alone (the others are
    listed with their help line but take no options, and ``only=""`` gives none its options):
    ``wafersim --help``, each command and a sweep worker import only the job they need."""
    parser = _Parser(prog="wafersim", description=DESCRIPTION)
    parser.add_argument("--version", action=_Version, nargs=0, default=argparse.SUPPRESS,
                        help="show the versions of wafersim and Numba and the Numba patches "
                        "that apply, then exit")  # fmt: skip
    subs = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, job in JOBS.items():
        sub = subs.add_parser(name, help=job.help, description=job.help)
        if only is None or name == only:
            chosen = command(name)
            chosen.add_arguments(sub)
            add_common_options(sub, chosen.seed, chosen.overrides, chosen.engine)
    return parser


def named_job(argv: list[str]) -> str:
    """The subcommand on the line ("" if none is): the first word that is not an option."""
    name = next((word for word in argv if not word.startswith("-")), "")
    return name if name in JOBS else ""


def parse_command_line(
    argv: list[str], parser: argparse.ArgumentParser | None = None
) -> argparse.Namespace:
    """``argv`` parsed (by ``parser``, default one built for the job named on the line), with
    its ``key=value`` words, wherever they stand, in ``overrides``."""
    name = named_job(argv)
    parser = parser or build_parser(only=name)
    overrides: list[str] = []
    if name:
        sub = _subparser(parser, name)
        argv, overrides = split_overrides(argv, sub)
        if overrides and not command(name).overrides:
            sub.error(f"{name} takes no key=value overrides, got {overrides[0]!r}")
    args = parser.parse_args(argv)
    args.overrides = overrides
    return args


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return subs.choices[name]
