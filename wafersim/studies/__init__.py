"""The defect study: what defects and repair cost a wafer, per defect density and repair
strategy, over seeds (``wafersim defects --study``)."""
