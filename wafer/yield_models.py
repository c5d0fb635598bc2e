"""Analytic yield: the probability that a region of area ``A`` has no killer defect.

With ``x = A * D`` the expected number of defects in the region (``D`` per cm^2):

- ``poisson``: ``exp(-x)``; defects fall independently and uniformly.
- ``murphy``: ``((1 - exp(-x)) / x)**2`` (1 at ``x = 0``); a triangular distribution of
  density across wafers. B. T. Murphy, "Cost-size optima of monolithic integrated circuits",
  Proc. IEEE 52(12):1537-1545, 1964.
- ``seeds``: ``1 / (1 + x)``; an exponential distribution of density. R. B. Seeds, "Yield,
  economic, and logistic models for complex digital arrays", IEEE International Convention
  Record, part 6, pp. 61-66, 1967.
- ``negative_binomial``: ``(1 + x / alpha)**-alpha``; a Gamma-distributed density with
  clustering parameter ``alpha`` (``alpha = 1`` is Seeds, ``alpha -> inf`` is Poisson).
  C. H. Stapper, "Modeling of integrated circuit defect sensitivities", IBM J. Res. Develop.
  27(6):549-557, 1983; C. H. Stapper, F. M. Armstrong and K. Saji, "Integrated circuit yield
  statistics", Proc. IEEE 71(4):453-470, 1983.

For any ``D > 0``: poisson < murphy < seeds. The ``clustered`` defect model of
:mod:`wafer.defects` is the negative binomial per PE tile, and its ``poisson`` model the
Poisson; :func:`expected_working_fraction` gives what their Monte-Carlo maps should show.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

from wafersim.wafer.defects import LINK_DEFECT_FRACTION, MM2_PER_CM2
from wafersim.wafer.errors import ConfigError, excerpt
from wafersim.wafer.spec import WaferSpec


def _poisson(x: float, alpha: float | None) -> float:
    return math.exp(-x)


def _murphy(x: float, alpha: float | None) -> float:
    return 1.0 if x == 0.0 else (-math.expm1(-x) / x) ** 2


def _seeds(x: float, alpha: float | None) -> float:
    return 1.0 / (1.0 + x)


def _negative_binomial(x: float, alpha: float | None) -> float:
    assert alpha is not None
    return math.exp(-alpha * math.log1p(x / alpha))


YIELD_MODELS: dict[str, Callable[[float, float | None], float]] = {
    "poisson": _poisson,
    "murphy": _murphy,
    "seeds": _seeds,
    "negative_binomial": _negative_binomial,
}
"""Yield models by name; each maps ``(area * density, alpha)`` to a yield in ``[0, 1]``."""

_NEEDS_ALPHA = frozenset({"negative_binomial"})


def _non_negative(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{name} must be a number, got {excerpt(value)}")
    if not 0.0 <= _as_float(value) < math.inf:
        raise ConfigError(f"{name}={excerpt(value)} is out of range [0, inf)")
    return float(value)


def _as_float(value: numbers.Real) -> float:
    """``value`` as a float; an integer too large for one is infinite."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _check_alpha(model: str, alpha: Any) -> float | None:
    if model not in _NEEDS_ALPHA:
        if alpha is not None:
            raise ConfigError(
                f"alpha={excerpt(alpha)} applies only to negative_binomial, not {excerpt(model)}"
            )
        return None
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
        raise ConfigError(f"{model} needs alpha, a number in (0, inf); got {excerpt(alpha)}")
    if not 0.0 < _as_float(alpha) < math.inf:
        raise ConfigError(f"alpha={excerpt(alpha)} is out of range (0, inf)")
    return float(alpha)


def predicted_yield(
    model: str, area_cm2: float, density_per_cm2: float, alpha: float | None = None
) -> float:
    """Probability that ``area_cm2`` at ``density_per_cm2`` defects/cm^2 has no defect."""
    if model not in YIELD_MODELS:
        raise ConfigError(
            f"unknown yield model {excerpt(model)}; valid models: {', '.join(YIELD_MODELS)}"
        )
    area = _non_negative("area_cm2", area_cm2)
    density = _non_negative("density_per_cm2", density_per_cm2)
    return YIELD_MODELS[model](area * density, _check_alpha(model, alpha))


def expected_working_fraction(
    spec: WaferSpec,
    model: str,
    density_per_cm2: float,
    alpha: float | None = None,
    link_defect_fraction: float = LINK_DEFECT_FRACTION,
) -> float:
    """Expected fraction of ``spec``'s PEs alive: one tile's yield at the killing density.

    Only ``1 - link_defect_fraction`` of the defects kill a PE (the rest cut a wire), so the
    killing density is ``density_per_cm2 * (1 - link_defect_fraction)``.
    """
    fraction = _non_negative("link_defect_fraction", link_defect_fraction)
    if fraction > 1.0:
        raise ConfigError(
            f"link_defect_fraction={excerpt(link_defect_fraction)} is out of range [0, 1]"
        )
    density = _non_negative("density_per_cm2", density_per_cm2)
    area_cm2 = spec.pe.area_mm2 / MM2_PER_CM2
    return predicted_yield(model, area_cm2, density * (1.0 - fraction), alpha)
