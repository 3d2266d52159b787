"""The autotuner (seed 5.4): gemm configs searched, ranked, measured and kept."""
