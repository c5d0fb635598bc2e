"""What a defect study sweeps and how it measures: :class:`StudyConfig` and its checks."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from wafersim.wafer.defects import generate
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset
from wafersim.wafer.repair import REPAIR_STRATEGIES

STUDY_MODELS = ("poisson", "clustered")  # random models a study can draw from
SEEDS_RANGE = (1, 1000)
WINDOW_PES_RANGE = (4, 64)  # up*/down* tables grow as (window_pes ** 2) ** 2
DEFAULT_WINDOW_PES = 16
WINDOWS_PER_MAP_RANGE = (1, 256)  # traffic windows drawn on each defect map
DEFAULT_WINDOWS_PER_MAP = 16  # enough that a map's mean is not one window's luck
DEFAULT_TRAFFIC_CYCLES = 3000
DEFAULT_TRAFFIC_WARMUP_CYCLES = 1000
MIN_TRAFFIC_CYCLES = 100
MAX_TRAFFIC_CYCLES = 1_000_000


def _check_int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"{name}={value!r} must be an integer in [{low}, {high}]")
    if not low <= value <= high:
        raise ConfigError(f"{name}={value!r} is out of range [{low}, {high}]")
    return int(value)


def _check_densities(values: Any) -> tuple[float, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
        raise ConfigError(f"densities_per_cm2={values!r} must be a non-empty list of numbers")
    out = []
    for value in values:
        ok = not isinstance(value, bool) and isinstance(value, (int, float, np.number))
        if not ok or not math.isfinite(value) or value < 0:
            raise ConfigError(
                f"densities_per_cm2: {value!r} is not allowed; a density is a finite number "
                f">= 0 (defects per cm^2)"
            )
        out.append(float(value))
    if len(set(out)) != len(out):
        raise ConfigError(f"densities_per_cm2={out} lists a density twice")
    return tuple(out)


def _check_strategies(values: Any) -> tuple[str, ...]:
    allowed = ", ".join(REPAIR_STRATEGIES)
    if isinstance(values, str) or not isinstance(values, Sequence) or not values:
        raise ConfigError(f"strategies={values!r} must be a non-empty list of: {allowed}")
    for value in values:
        if value not in REPAIR_STRATEGIES:
            raise ConfigError(f"strategies: unknown repair strategy {value!r}; valid: {allowed}")
    if len(set(values)) != len(values):
        raise ConfigError(f"strategies={list(values)} lists a strategy twice")
    return tuple(values)


@dataclass(frozen=True)
class StudyConfig:
    """What a study sweeps and how it measures; every field is checked on construction."""

    densities_per_cm2: tuple[float, ...]
    strategies: tuple[str, ...] = tuple(REPAIR_STRATEGIES)
    seeds: int = 3  # samples per (density, strategy)
    seed: int = 0  # the one user seed every stream comes from
    model: str = "poisson"
    model_params: dict[str, Any] = field(default_factory=dict)  # e.g. alpha, cluster_size_pes
    window_pes: int = DEFAULT_WINDOW_PES
    windows_per_map: int = DEFAULT_WINDOWS_PER_MAP
    traffic_cycles: int = DEFAULT_TRAFFIC_CYCLES
    traffic_warmup_cycles: int = DEFAULT_TRAFFIC_WARMUP_CYCLES

    __hash__ = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "densities_per_cm2", _check_densities(self.densities_per_cm2))
        set_(self, "strategies", _check_strategies(self.strategies))
        set_(self, "seeds", _check_int("seeds", self.seeds, *SEEDS_RANGE))
        set_(self, "seed", _check_int("seed", self.seed, 0, 2**63 - 1))
        set_(self, "window_pes", _check_int("window_pes", self.window_pes, *WINDOW_PES_RANGE))
        windows = _check_int("windows_per_map", self.windows_per_map, *WINDOWS_PER_MAP_RANGE)
        set_(self, "windows_per_map", windows)
        cycles = _check_int(
            "traffic_cycles", self.traffic_cycles, MIN_TRAFFIC_CYCLES, MAX_TRAFFIC_CYCLES
        )
        set_(self, "traffic_cycles", cycles)
        warmup = _check_int("traffic_warmup_cycles", self.traffic_warmup_cycles, 0, cycles // 2)
        set_(self, "traffic_warmup_cycles", warmup)
        if self.model not in STUDY_MODELS:
            raise ConfigError(f"model={self.model!r} is not one of: {', '.join(STUDY_MODELS)}")
        set_(self, "model_params", _check_model_params(self.model, self.model_params))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["densities_per_cm2"] = list(self.densities_per_cm2)
        out["strategies"] = list(self.strategies)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StudyConfig:
        return cls(**{**data, "densities_per_cm2": tuple(data["densities_per_cm2"])})


def _check_model_params(model: str, params: Any) -> dict[str, Any]:
    """``params`` after the defect model has checked their names and ranges on a tiny map."""
    if not isinstance(params, Mapping):
        raise ConfigError(f"model_params={params!r} must be a mapping of name -> value")
    params = dict(params)
    if "defect_density_per_cm2" in params or "pe_defect_prob" in params:
        raise ConfigError("model_params must not set the rate: the study sweeps densities")
    generate(preset("tiny"), model, 0, defect_density_per_cm2=0.0, **params)
    return params
