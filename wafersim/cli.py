"""The ``wafersim`` command line: one entry point, one subcommand per job.

Every subcommand takes ``--json``; those that draw anything ``--seed``; ``key=value`` words
anywhere on the line set spec keys (``run``: run-config keys; ``plot`` and ``sweep`` take
none). Errors are one line
on stderr and exit status 2; the library raises, only this module prints.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from wafersim.jobs import command
from wafersim.options import check_output, flag
from wafersim.parser import parse_command_line
from wafersim.wafer.errors import WaferSimError


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit status
    (0, or 2 after a one-line error on stderr)."""
    args = parse_command_line(sys.argv[1:] if argv is None else list(argv))
    job = command(args.command)
    try:
        for option, kind in job.outputs.items():
            check_output(getattr(args, option, None), flag(option), kind)
        result = job.execute(args)
    except WaferSimError as error:
        print(f"wafersim {args.command}: error: {error}", file=sys.stderr)
        return 2
    except RecursionError:  # a file's tables or lists nested thousands deep
        print(f"wafersim {args.command}: error: an input file is nested too deeply",
              file=sys.stderr)  # fmt: skip
        return 2
    _emit(result, args.json, job.text)
    return 0


def _emit(result: dict[str, Any], as_json: bool, text: Any) -> None:
    if as_json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(text(result))


if __name__ == "__main__":
    sys.exit(main())
