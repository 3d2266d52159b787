"""PTX backend: our own PTX text per kernel, a JSON launch plan, and executors (simulator, CUDA)."""
