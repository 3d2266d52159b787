#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: run the gpu-marked PTX tests (op tests, the f16 mma.sync
# matmul on odd and aligned shapes, implicit-GEMM conv, two-pass reductions), then the GPU
# benchmark (matmul 4096^2 f32 on the FMA tiles and f16 on mma.sync + cp.async, checked
# against NumPy, and a fused elementwise chain, vs CuPy/cuBLAS). Target: < 4 minutes.
# usage: bash benchmarks/gpu.sh [gpu_bench.py options]     (from anywhere)
# Each step has its own timeout; a failing step does not stop the next one; the exit
# status is non-zero if any step failed.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import cuda" 2>/dev/null || timeout 60 python3 -m pip install -q cuda-python 2>/dev/null || true
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null \
  || echo "nvidia-smi: not available"
status=0
echo "== gpu tests"
timeout 150 python3 -m pytest -q -m gpu tests/ptx -p no:cacheprovider -x -rs || status=1
echo "== benchmark"
timeout 90 python3 benchmarks/gpu_bench.py "$@" || status=1
echo "gpu.sh: exit $status"
exit $status
