"""``wafersim examples``: the bundled run configs, models and sweep files, or ``--copy DIR``
to copy them into a folder to edit."""

from __future__ import annotations

import argparse
from typing import Any

from wafersim.bundled import KINDS, bundled, copy_examples, examples_root
from wafersim.commands.jobs import Command


def add_examples_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--copy", metavar="DIR", help="copy every bundled example into DIR")


def run_examples(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"root": str(examples_root())}
    result.update({kind: sorted(bundled(kind)) for kind in KINDS})
    if args.copy:
        result["copied"] = [str(p) for p in copy_examples(args.copy)]
    return result


def _examples_text(result: dict[str, Any]) -> str:
    uses = {"run": "wafersim run NAME", "model": "wafersim compile NAME",
            "sweep": "wafersim sweep NAME"}  # fmt: skip
    lines = [f"{kind} ({uses[kind]}): {', '.join(result[kind])}" for kind in KINDS]
    if "copied" in result:
        lines.append(f"copied {len(result['copied'])} files")
    return "\n".join(lines)


COMMAND = Command(
    add_examples_arguments, run_examples, _examples_text, seed=False, overrides="",
    outputs={"copy": "folder"},
)  # fmt: skip
