"""wafersim's bundled examples, shipped inside the package as ``wafersim.examples``: run
configs here, the model zoo in ``models/``, sweep files in ``sweeps/`` and a GEMM algorithm
written in one file in ``algorithms/``. Commands take them by name (``wafersim run
fc_digits``); ``wafersim examples`` lists them and ``--copy DIR`` copies them to edit."""
