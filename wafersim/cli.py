"""The ``wafersim`` command line: one entry point, one subcommand per job.

Every subcommand takes ``--json``, ``--seed`` and ``key=value`` overrides. Errors are one line
on stderr and exit status 2; the library raises, only this module prints.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from wafer.errors import WaferSimError
from wafersim.jobs import JOBS, command
from wafersim.parser import build_parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(only=_named_job(argv)).parse_args(argv)
    job = command(args.command)
    try:
        result = job.run(args)
    except WaferSimError as error:
        print(f"wafersim {args.command}: error: {error}", file=sys.stderr)
        return 2
    _emit(result, args.json, job.text)
    return 0


def _named_job(argv: list[str]) -> str:
    """The subcommand on the line ("" if none is): the first word that is not an option."""
    name = next((word for word in argv if not word.startswith("-")), "")
    return name if name in JOBS else ""


def _emit(result: dict[str, Any], as_json: bool, text: Any) -> None:
    if as_json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(text(result))


if __name__ == "__main__":
    sys.exit(main())
