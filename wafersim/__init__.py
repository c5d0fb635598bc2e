"""The application layer: the ``wafersim`` command, sweeps, studies and plots."""
