"""The profiler (seed 5.10): per fused kernel roofline numbers and latency histograms."""
