#!/usr/bin/env bash
# Device check for the GPU sources (issue 4). Needs an NVIDIA GPU, its driver, and torch with
# CUDA in the Python below. Runs a ~30 s bf16 matmul burst on GPU 0 while sampling it with
# trainmeter's NVML backend, prints the rows, OFU and the ladder, records an NVML fixture, and
# runs the fake-backend tests. Everything lands in $OUT (default ./gpu_check_out).
# Total well under 3 minutes.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
[ -x .venv/bin/python ] && PY=${PYTHON:-.venv/bin/python}
OUT=${OUT:-$PWD/gpu_check_out}
SECONDS_BURN=${BURN_SECONDS:-30}
mkdir -p "$OUT"
export OUT PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

step() { printf '\n== %s\n' "$*"; }

step "environment"
$PY -c 'import sys, torch, pynvml; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tee "$OUT/env.txt"

step "NVML answers under load, OFU and the ladder (${SECONDS_BURN}s burst)"
timeout 150 $PY scripts/gpu_check.py watch --seconds "$SECONDS_BURN" --out "$OUT" 2>&1 | tee "$OUT/watch.txt"
rc_watch=${PIPESTATUS[0]}

step "fake-backend tests (should pass anywhere)"
timeout 120 $PY -m pytest -q tests/sources -x -k "not attach" 2>&1 | tail -5 | tee "$OUT/pytest.txt"

step "done"
echo "watch exit status: $rc_watch; outputs in $OUT"
ls -la "$OUT"
exit "$rc_watch"
