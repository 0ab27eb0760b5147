#!/usr/bin/env bash
# The GPU check in one call (`make gpu-check`), for a GPU machine whose Python has torch, transformers,
# accelerate and peft but no package index:
#
#   bash benchmarks/gpu_check.sh        # PYTHON=python3 by default; results in ./gpu-check (git-ignored)
#
# 1. stops with one line unless that Python sees a CUDA device (nothing installed, nothing run);
# 2. installs the wheels of ./wheels (made by benchmarks/gpu_wheels.sh on a machine with the index, copied
#    along; without ./wheels the packages already there must do), then cheems itself with --no-deps;
# 3. runs the gpu tests (pytest -m gpu tests/test_gpu.py) against the installed cheems;
# 4. runs benchmarks/gpu_check.py: `cheems train` and `cheems score` on a random Qwen2 of Qwen2-0.5B's shapes
#    in bf16 (tokens/s, peak memory), a generative judge (`cheems export judge-sft`, `cheems train-judge`, `cheems
#    eval --judge-model DIR --backend hf`) and `cheems train --lm-weight` on a causal Qwen2 of the same shapes,
#    then prints the summary for BENCHMARKS.md (also gpu-check/summary.md).
# Exits non-zero when a step fails. Each step has a time limit: on an H100 the whole check takes minutes.
#
# CHEEMS_GPU_CHECK_DEVICE=cpu runs steps 2-4 on the CPU with a 2-layer model: a smoke run of this script
# (the figures mean nothing). It installs into PYTHON too: give it a throwaway environment.
set -uo pipefail

cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=gpu-check
export CHEEMS_GPU_CHECK_DEVICE=${CHEEMS_GPU_CHECK_DEVICE:-cuda}

fail() {
    echo "gpu_check.sh: $*" >&2
    exit 1
}

case $CHEEMS_GPU_CHECK_DEVICE in
cuda | cpu) ;;
*) fail "CHEEMS_GPU_CHECK_DEVICE must be cuda or cpu, got '$CHEEMS_GPU_CHECK_DEVICE'" ;;
esac
# one Python start: torch's version and whether it sees a GPU (transformers and accelerate found, not imported)
probe='import importlib.util as u, torch
assert u.find_spec("transformers") and u.find_spec("accelerate")
print(torch.__version__, int(torch.cuda.is_available()))'
read -r torch cuda < <("$PY" -c "$probe" 2>/dev/null) ||
    fail "$PY cannot import torch, transformers and accelerate; set PYTHON to the Python that has them"
if [[ $CHEEMS_GPU_CHECK_DEVICE == cuda && $cuda != 1 ]]; then
    fail "no CUDA device (torch $torch in $PY sees none): nothing was run; run it on a GPU machine"
fi

if [[ -f wheels/requirements.txt ]]; then
    "$PY" -m pip install --quiet --no-index --find-links wheels -r wheels/requirements.txt ||
        fail "installing ./wheels failed (above): fetch them for this Python with bash benchmarks/gpu_wheels.sh $("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
else
    echo "gpu_check.sh: no ./wheels (bash benchmarks/gpu_wheels.sh fetches them): using the packages $PY has"
fi
# no build isolation: it would fetch setuptools from the index
"$PY" -m pip install --quiet --no-deps --no-build-isolation . || fail "pip install --no-deps . failed (above)"

rm -rf "$OUT"
mkdir -p "$OUT"
# from the repository root, whose src/ is not on the path: the tests import the installed cheems
timeout 240 "$PY" -m pytest -m gpu tests/test_gpu.py -p no:cacheprovider -q -rs --junitxml="$OUT/tests.xml"
tests=$?
timeout 360 "$PY" benchmarks/gpu_check.py --out "$OUT" --tests "$OUT/tests.xml"
bench=$?
if ((tests != 0 || bench != 0)); then
    fail "failed: gpu tests exit $tests, train/score exit $bench (124: over its time limit); see above"
fi
