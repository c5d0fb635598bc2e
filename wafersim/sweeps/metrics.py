"""The metrics a sweep keeps: each a dotted path into its job's JSON result, read by a
:class:`Metric` made once, when the sweep file loads.

A name is checked then against what the job's result can hold, so a misspelled metric is
refused before any point runs, not found missing from every point's result after all of them
ran: the figures of the commands' fields table (:data:`wafersim.fields.DOCUMENTS`,
docs/fields.md; list elements cannot be metrics), its yes/no flags
(:data:`wafersim.fields.FLAGS`, kept as 1 and 0), the inputs a result echoes
(:data:`wafersim.fields.ECHOED`) and the numbers of ``run``'s own modes (``--validate-only``,
``--compile-only``: :class:`memoryx.run_modes.ModeResult`). A known name that one point's
result lacks (a figure only some runs report) fails that point, naming the result's keys.
"""

from __future__ import annotations

import difflib
import fnmatch
import typing
from dataclasses import dataclass
from typing import Any

from wafersim.wafer.errors import ConfigError, excerpt

NAME_CHARS = 100  # longer metric names are compared with no known name (none is that long)


@dataclass(frozen=True)
class Metric:
    """One metric: its name (the results table's column ``metrics/<name>``) and the keys
    its dotted path walks down the job's result."""

    name: str
    keys: tuple[str, ...]

    @classmethod
    def named(cls, name: str) -> Metric:
        return cls(name, tuple(name.split(".")))

    def read(self, result: dict[str, Any]) -> float:
        """The metric's value in ``result`` as a float (null: NaN); ConfigError where the
        result lacks it (naming the result's scalar keys) or holds no number there."""
        value: Any = result
        for key in self.keys:
            if not isinstance(value, dict) or key not in value:
                keys = ", ".join(sorted(k for k, v in result.items() if _is_scalar(v)))
                raise ConfigError(
                    f"metric {self.name!r} is not in the job's result; scalar keys: {keys}"
                )
            value = value[key]
        if not _is_scalar(value):
            raise ConfigError(f"metric {self.name!r} is {value!r}, not a number")
        return float("nan") if value is None else float(value)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float)


def job_metrics(job: str, names: tuple[str, ...]) -> tuple[Metric, ...]:
    """A :class:`Metric` per name; ConfigError naming the first that ``job``'s result cannot
    hold, with the names it can (``*``: any key)."""
    from wafersim.fields import ECHOED

    known = result_names(job)
    for name in names:
        if not name.startswith(ECHOED) and not any(fnmatch.fnmatchcase(name, k) for k in known):
            raise ConfigError(
                f"metric {excerpt(name)} is not in the job's result; "
                f"{_like(name, known)}see docs/fields.md, wafersim {job}"
            )
    return tuple(Metric.named(name) for name in names)


def _like(name: str, known: tuple[str, ...]) -> str:
    """The known names closest to ``name`` (a misspelling's right name), as a clause; every
    name is in docs/fields.md, so the line stays short."""
    close = difflib.get_close_matches(name, known, n=3) if len(name) <= NAME_CHARS else []
    return f"scalar keys like it: {', '.join(close)}; " if close else ""


def result_names(job: str) -> tuple[str, ...]:
    """The scalar names (fnmatch patterns) that ``job``'s result may hold, echoed inputs
    aside: its figures and flags (:mod:`wafersim.fields`) and ``run``'s modes' numbers."""
    from wafersim.fields import DOCUMENTS, FLAGS

    documented = [field.path for field in DOCUMENTS[job] if "[]" not in field.path]
    names = [*documented, *FLAGS.get(job, {}), *(_mode_figures() if job == "run" else ())]
    return tuple(dict.fromkeys(names))  # each once, in the table's order


def _mode_figures() -> tuple[str, ...]:
    """The numbers of ``run --validate-only`` and ``--compile-only``'s result."""
    from wafersim.memoryx.run_modes import ModeResult

    hints = typing.get_type_hints(ModeResult)
    return tuple(name for name, kind in hints.items() if kind in (int, float))
