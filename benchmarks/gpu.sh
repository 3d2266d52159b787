#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: run the gpu-marked PTX tests, then the GPU benchmark
# (matmul 4096^2 f32/f16 and a fused elementwise chain vs CuPy/cuBLAS). Target: < 3 minutes.
# usage: bash benchmarks/gpu.sh     (from the repository root)
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import cuda" 2>/dev/null || python3 -m pip install -q cuda-python 2>/dev/null || true
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "nvidia-smi: not available"
status=0
timeout 120 python3 -m pytest -q -m gpu tests/ptx -p no:cacheprovider || status=1
timeout 90 python3 benchmarks/gpu_bench.py "$@" || status=1
exit $status
