"""Programs for the fabric: matmul/GEMV variants, broadcasts, reductions."""
