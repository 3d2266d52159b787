#!/usr/bin/env bash
# On the dev machine, before a GPU run: put in .whl/ the wheels of the Python packages
# wiadsl needs that the GPU machine's image lacks (it has numpy, llvmlite, pytest,
# cuda-python and CuPy, and cannot download; .gitignore keeps .whl/ out of git). gpu.sh
# installs whatever .whl/ holds; the device call must carry it (carry: [".whl"]).
# usage: bash benchmarks/gpu_wheels.sh [PACKAGE==VERSION ...]   (default: lark, this machine's version)
set -eu
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
    set -- "lark==$(python3 -c 'import lark; print(lark.__version__)')"
fi
mkdir -p .whl
# pure-Python wheels: any platform; --no-deps: each missing need is named here
python3 -m pip download -q --no-deps --only-binary=:all: -d .whl "$@"
ls -l .whl
