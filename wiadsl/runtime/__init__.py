"""The Python API: argument checking, kernel specialization, and calling a backend."""
