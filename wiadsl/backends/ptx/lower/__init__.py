"""Lowering of tensor IR to device kernels and a host launch plan."""
