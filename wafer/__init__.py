"""The machine description: specs and presets, defect maps and yield models, repair."""

__version__ = "0.2.0"
