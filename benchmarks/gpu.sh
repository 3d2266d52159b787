#!/usr/bin/env bash
# The prepared GPU run of issue 22, in one call (target: under 4 minutes on an H100/H200):
#   1. setup: Python packages (wheels carried in .whl/, see gpu_wheels.sh), the GPU, CuPy
#   2. compile: every benchmark row's kernels at GPU size through this machine's ptxas
#   3. tests: the gpu-marked tests (tests/ptx/test_gpu.py: every op and example kernel
#      against the interpreter; test_gpu_kernels.py: wgmma GEMM and its fallbacks, flash
#      attention, column reductions, transposes, packed halves, one-kernel rows)
#   4. bench: benchmarks/gpu_bench.py (GEMMs vs cuBLAS, rows, fused elementwise vs the
#      copy bandwidth, attention), one table at the end
# usage: bash benchmarks/gpu.sh [--sim] [gpu_bench.py options, e.g. --json $OUT/bench.json]
#   --sim: the same steps on the PTX simulator (no GPU, no CuPy): a dry run of the plumbing.
#   gpu_bench.py options go to the compile and bench steps (--rows i8,causal: those rows);
#   WIADSL_GPU_TESTS_K=EXPR runs only the tests pytest -k EXPR selects (a rerun).
# Each step has its own time limit and prints one summary line; a failing step does not
# stop the next; the last lines summarize all steps; the exit status is 1 if any failed.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
SIM=0
if [ "${1:-}" = "--sim" ]; then SIM=1; shift; fi
status=0
SUMMARY=()

step() {  # step NAME LIMIT_SECONDS COMMAND...
    local name=$1 limit=$2 rc=0 t0=$SECONDS state=ok
    shift 2
    echo "== $name (limit ${limit} s): $*"
    timeout --kill-after=10 "$limit" "$@" || rc=$?
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then state="TIMEOUT"
    elif [ "$rc" -ne 0 ]; then state="FAILED (exit $rc)"; fi
    [ "$rc" -eq 0 ] || status=1
    SUMMARY+=("$name: $state ($((SECONDS - t0)) s)")
    echo "== $name: $state ($((SECONDS - t0)) s)"
}

have() { python3 -c "import $1" 2>/dev/null; }

# ---- 1. setup
t0=$SECONDS
echo "== setup"
if compgen -G ".whl/*.whl" > /dev/null; then  # wheels carried from the dev machine
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/wiadsl-site .whl/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/wiadsl-site"
fi
missing=""
for m in numpy lark llvmlite pytest; do have "$m" || missing="$missing $m"; done
if [ -n "$missing" ]; then
    echo "gpu.sh: missing Python packages:$missing. The GPU machine cannot download: run"
    echo "  bash benchmarks/gpu_wheels.sh   (here, on the dev machine) and carry .whl"
    echo "gpu.sh: setup FAILED; nothing else can run"
    exit 2
fi
if [ "$SIM" -eq 0 ]; then
    # Installs only where a package is missing; with no network pip fails fast (no retries).
    pipq() { timeout "$1" python3 -m pip install -q --retries 0 --timeout 10 "${@:2}" > /dev/null 2>&1; }
    have cuda.bindings.driver || have cuda.cuda || pipq 60 cuda-python || echo "gpu.sh: cuda-python could not be installed"
    have cupy || pipq 60 cupy-cuda13x || pipq 60 cupy-cuda12x || echo "gpu.sh: no CuPy: rows will have no reference"
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.max.sm,clocks.max.mem \
        --format=csv 2>/dev/null || echo "nvidia-smi: not available"
fi
python3 - <<'EOF' || status=1
import platform, numpy, lark
print(f"python {platform.python_version()}, numpy {numpy.__version__}, lark {lark.__version__}")
try:
    import cupy
    print(f"cupy {cupy.__version__}")
except Exception as e:
    print(f"cupy: not available ({type(e).__name__})")
EOF
SUMMARY+=("setup: ok ($((SECONDS - t0)) s)")

# ---- 2-4
step compile 90 python3 benchmarks/gpu_bench.py --compile-only "$@"
TESTS=(tests/ptx/test_gpu.py tests/ptx/test_gpu_kernels.py)
[ -n "${WIADSL_GPU_TESTS_K:-}" ] && TESTS+=(-k "$WIADSL_GPU_TESTS_K")
if [ "$SIM" -eq 1 ]; then
    step tests 400 env WIADSL_GPU_TARGET=ptxsim python3 -m pytest -q -m gpu "${TESTS[@]}" -rfE
    step bench 120 python3 benchmarks/gpu_bench.py --sim "$@"
else
    XDIST=()
    have xdist && XDIST=(-n 8)  # compiling dominates: 8 processes, one context each
    step tests 150 python3 -m pytest -q -m gpu "${TESTS[@]}" -rfEs ${XDIST[@]+"${XDIST[@]}"}  # empty-array safe before bash 4.4
    step bench 200 python3 benchmarks/gpu_bench.py "$@"
fi

echo "== gpu.sh summary ($( [ "$SIM" -eq 1 ] && echo "SIMULATOR DRY RUN" || echo GPU ), $SECONDS s)"
for line in "${SUMMARY[@]}"; do echo "   $line"; done
echo "gpu.sh: exit $status"
exit $status
