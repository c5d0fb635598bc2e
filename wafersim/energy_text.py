"""One line of text for an energy split (``wafer.energy.EnergySplit.to_dict``)."""

from __future__ import annotations

from wafer.energy import LABELS


def energy_line(split: dict[str, float], flops: float, unit: str = "uJ") -> str:
    """``energy 29.5 uJ: compute 12%, SRAM 86%, fabric 2% (2.2 GFLOP/J)``."""
    total = split["total_j"]
    scale = {"uJ": 1e6, "J": 1.0, "kJ": 1e-3}[unit]
    parts = ", ".join(f"{LABELS[name]} {split[name] / total:.0%}"
                      for name in LABELS if split[name] > 0)  # fmt: skip
    rate = flops / 1e9 / total if total else 0.0
    return f"energy {total * scale:.3g} {unit}: {parts} ({rate:.3g} GFLOP/J)"
