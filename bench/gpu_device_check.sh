#!/usr/bin/env bash
# The GPU checks of issue 26 in one script, for a machine with a CUDA GPU and CuPy:
# `pytest -m gpu` on tests/gpu, then `autotile bench gpu`. Run it from a checkout where
# autotile is built (in-tree build or installed); outputs go to $OUT (default bench/out/gpu).
#
#   bash bench/gpu_device_check.sh            # full sizes (about a minute on an H200)
#   BENCH_ARGS=--quick bash bench/gpu_device_check.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/out/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 AUTOTILE_BENCH_OUT=$OUT
[ -n "$(ls python/autotile/_core*.so 2>/dev/null)" ] && export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c "import sys, cupy, numpy; print(sys.version.split()[0], 'cupy', cupy.__version__, 'numpy', numpy.__version__, 'cuda', cupy.cuda.runtime.runtimeGetVersion())"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
timeout "${PT_TIMEOUT:-600}" python3 -m pytest -m gpu tests/gpu -rs -s -p no:cacheprovider --durations=12 \
  ${PYTEST_ARGS:-} > "$OUT/pytest_gpu.txt" 2>&1
rc=$?
echo "pytest rc=$rc" >> "$OUT/pytest_gpu.txt"
tail -3 "$OUT/pytest_gpu.txt"
timeout "${BENCH_TIMEOUT:-600}" python3 -m autotile.bench.gpu ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench_gpu.txt"
exit $rc
