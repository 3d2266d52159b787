"""Tests of the CPU (llvmlite) backend."""
