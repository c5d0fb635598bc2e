"""One line of text for an energy split (``wafer.energy.EnergySplit.to_dict``)."""

from __future__ import annotations

from wafersim.wafer.energy import LABELS

UNITS = ((1e3, "kJ"), (1.0, "J"), (1e-3, "mJ"), (1e-6, "uJ"), (1e-9, "nJ"))


def energy_line(split: dict[str, float], flops: float) -> str:
    """``energy 29.5 uJ: compute 12%, SRAM 86%, fabric 2% (2.2 GFLOP/J)``."""
    total = split["total_j"]
    scale, unit = next(((s, u) for s, u in UNITS if total >= s), UNITS[-1])
    parts = ", ".join(f"{LABELS[name]} {split[name] / total:.0%}"
                      for name in LABELS if split[name] > 0)  # fmt: skip
    rate = flops / 1e9 / total if total else 0.0
    return f"energy {total / scale:.3g} {unit}: {parts} ({rate:.3g} GFLOP/J)"
