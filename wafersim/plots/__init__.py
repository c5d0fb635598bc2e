"""The PNG figures wafersim draws (the ``plot`` extra: matplotlib): a run's, a sweep's and the
defect study's, and the shared heatmap and animation."""
