"""The ``wafersim`` command line: one entry point, one subcommand per job.

Every subcommand takes ``--json``, ``--seed`` and trailing ``key=value`` spec overrides.
Errors are one line on stderr and exit status 2; the library raises, only this module prints.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from wafer.errors import WaferSimError


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line, like every other error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"wafersim: error: {message} (see --help)\n")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--seed", type=int, default=0, help="seed for every random stream")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="spec overrides")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole CLI, or with ``only`` the one subcommand (a sweep worker imports only that
    job's modules)."""
    from wafer import commands

    parser = _Parser(prog="wafersim", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=_version())
    subs = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (add_arguments, _run, help_text) in commands.COMMANDS.items():
        if only is not None and name != only:
            continue
        sub = subs.add_parser(name, help=help_text, description=help_text)
        add_arguments(sub)
        _common(sub)
    return parser


def _version() -> str:
    from wafer import __version__

    return f"wafersim {__version__}"


def main(argv: list[str] | None = None) -> int:
    from wafer import commands

    args = build_parser().parse_args(argv)
    _add_arguments, run, _help = commands.COMMANDS[args.command]
    try:
        result = run(args)
    except WaferSimError as error:
        print(f"wafersim {args.command}: error: {error}", file=sys.stderr)
        return 2
    _emit(result, args.json, commands.TEXT_FORMATTERS.get(args.command))
    return 0


def _emit(result: dict[str, Any], as_json: bool, text: Callable[[dict], str] | None) -> None:
    if as_json or text is None:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(text(result))


if __name__ == "__main__":
    sys.exit(main())
