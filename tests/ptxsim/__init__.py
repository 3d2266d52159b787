"""Tests of the PTX simulator (wiadsl.backends.ptx.sim)."""
