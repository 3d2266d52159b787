"""Helpers for tests of the compiler (FileCheck-style matching of IR text)."""
