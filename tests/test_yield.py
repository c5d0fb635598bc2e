"""Analytic yield models, and the Monte-Carlo defect maps that must agree with them."""

import math

import numpy as np
import pytest
from wafersim.wafer.defects import LINK_DEFECT_FRACTION, generate
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset
from wafersim.wafer.yield_models import YIELD_MODELS, expected_working_fraction, predicted_yield

DENSITY = 200.0  # defects per cm^2: ~0.1 defects per WSE-2-sized tile, so ~10 % dead


def square_spec(side):
    """A wafer of ``side`` x ``side`` physical tiles with WSE-2 PEs."""
    return preset("small").replace(
        {"logical_width_pes": side, "logical_height_pes": side, "spare_rows": 0}
    )


def working_fractions(spec, model, seeds, **params):
    """Fraction of PEs alive in each of ``seeds`` maps."""
    return np.array(
        [
            generate(spec, model, s, defect_density_per_cm2=DENSITY, **params).working_pes
            / spec.physical_pes
            for s in seeds
        ]
    )


def assert_mean_matches(samples, expected):
    """The sample mean lies within 4 standard errors of ``expected``."""
    error = samples.std(ddof=1) / math.sqrt(samples.size)
    assert abs(samples.mean() - expected) <= 4 * error, (samples.mean(), expected, error)


@pytest.mark.parametrize(
    ("model", "alpha", "x", "expected"),
    [
        ("poisson", None, 1.0, math.exp(-1.0)),
        ("murphy", None, 1.0, (1 - math.exp(-1.0)) ** 2),
        ("seeds", None, 1.0, 0.5),
        ("negative_binomial", 2.0, 1.0, 1.5**-2),
        ("negative_binomial", 0.5, 3.0, 7.0**-0.5),
    ],
)
def test_formulas_match_their_definitions(model, alpha, x, expected):
    """Each formula gives its textbook value at a hand-computed point."""
    assert predicted_yield(model, x / 2, 2.0, alpha) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("model", list(YIELD_MODELS))
def test_zero_density_gives_full_yield(model):
    """Every model yields exactly 1 with no defects, and also with no area."""
    alpha = 2.0 if model == "negative_binomial" else None
    assert predicted_yield(model, 5.0, 0.0, alpha) == 1.0
    assert predicted_yield(model, 0.0, 5.0, alpha) == 1.0


def test_murphy_lies_between_poisson_and_seeds():
    """For AD > 0, poisson < murphy < seeds (Poisson most pessimistic, Seeds most optimistic)."""
    for x in np.logspace(-3, 2, 60):
        poisson = predicted_yield("poisson", float(x), 1.0)
        murphy = predicted_yield("murphy", float(x), 1.0)
        seeds = predicted_yield("seeds", float(x), 1.0)
        assert poisson < murphy < seeds, x


def test_negative_binomial_limits():
    """The negative binomial is Seeds at alpha=1 and tends to Poisson as alpha grows."""
    for x in (0.01, 0.5, 3.0):
        assert predicted_yield("negative_binomial", x, 1.0, 1.0) == pytest.approx(
            predicted_yield("seeds", x, 1.0), rel=1e-12
        )
        assert predicted_yield("negative_binomial", x, 1.0, 1e9) == pytest.approx(
            predicted_yield("poisson", x, 1.0), rel=1e-6
        )


def test_murphy_is_stable_near_zero():
    """Murphy's yield is smooth and below 1 for tiny AD, not lost to cancellation."""
    assert predicted_yield("murphy", 1e-12, 1.0) == pytest.approx(1 - 1e-12, abs=1e-15)


def test_poisson_monte_carlo_matches_poisson_formula():
    """The poisson model's working fraction matches exp(-A*D*(1-f)) per tile."""
    spec = preset("small")
    samples = working_fractions(spec, "poisson", range(20))
    assert_mean_matches(samples, expected_working_fraction(spec, "poisson", DENSITY))


@pytest.mark.parametrize(("alpha", "formula"), [(2.0, "negative_binomial"), (1.0, "seeds")])
def test_clustered_monte_carlo_matches_clustered_formula(alpha, formula):
    """The clustered model's working fraction matches (1 + A*D*(1-f)/alpha)^-alpha."""
    spec = square_spec(512)
    samples = working_fractions(spec, "clustered", range(10), alpha=alpha)
    formula_alpha = alpha if formula == "negative_binomial" else None
    expected = expected_working_fraction(spec, formula, DENSITY, formula_alpha)
    assert_mean_matches(samples, expected)
    assert abs(expected - expected_working_fraction(spec, "poisson", DENSITY)) > 1e-3


def test_working_fraction_counts_only_killing_defects():
    """Only 1 - link_defect_fraction of the defects kill a PE."""
    spec = preset("small")
    area_cm2 = spec.pe.area_mm2 / 100
    killing = DENSITY * (1 - LINK_DEFECT_FRACTION)
    expected = predicted_yield("poisson", area_cm2, killing)
    assert expected_working_fraction(spec, "poisson", DENSITY) == pytest.approx(expected)
    assert expected_working_fraction(spec, "poisson", DENSITY, link_defect_fraction=1.0) == 1.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("weibull", 1.0, 1.0), "unknown yield model 'weibull'; valid models: poisson, murphy"),
        (("poisson", -1.0, 1.0), r"area_cm2=-1.0 is out of range \[0, inf\)"),
        (("poisson", 1.0, -0.5), r"density_per_cm2=-0.5 is out of range"),
        (("poisson", 1.0, math.nan), "density_per_cm2=nan is out of range"),
        (("poisson", "1", 1.0), "area_cm2 must be a number"),
        (("negative_binomial", 1.0, 1.0), "negative_binomial needs alpha"),
        (("negative_binomial", 1.0, 1.0, 0.0), r"alpha=0.0 is out of range \(0, inf\)"),
        (("seeds", 1.0, 1.0, 2.0), "alpha=2.0 applies only to negative_binomial"),
    ],
)
def test_bad_yield_arguments_name_the_field(args, message):
    """Bad yield-model arguments raise ConfigError naming the field."""
    with pytest.raises(ConfigError, match=message):
        predicted_yield(*args)


def test_bad_link_fraction_is_rejected(tiny):
    """expected_working_fraction checks link_defect_fraction is in [0, 1]."""
    with pytest.raises(ConfigError, match="link_defect_fraction=1.5"):
        expected_working_fraction(tiny, "poisson", 1.0, link_defect_fraction=1.5)
