"""Device-kernel generators, one module per op class (elementwise, row, matmul, window)."""
