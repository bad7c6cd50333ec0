#!/usr/bin/env bash
# Issue 32's GPU session in one command, on a machine with a CUDA GPU, CuPy, cuDNN, CMake,
# Cython and PyTorch: a fresh build of autotile from this source tree (no core built
# elsewhere), `pytest -m gpu tests/gpu` against it (the launch list captured as a CUDA graph:
# tests/gpu/test_gpu_launch_device.py; the runtime, swaps, MultiFetch), then `autotile bench
# gpu` with its PyTorch columns (AlexNet batch 128 and VGG-16 batch 32, 1/2/4/8 workers sharing
# GPU 0, launch list vs op by op, PyTorch fp32 (TF32 off) and bf16 autocast, eager and CUDA
# graph, median of 20 steps) and the host-cost table on the stand-in for comparison.
#
#   bash bench/gpu_session.sh              # all phases, about 10-14 minutes on an H200:
#   bash bench/gpu_session.sh build        #   3-5 min  (pip install --no-build-isolation --no-deps .)
#   bash bench/gpu_session.sh test         #   2-4 min  (pytest -m gpu tests/gpu)
#   bash bench/gpu_session.sh bench        #   5-7 min  (autotile bench gpu, --sim)
#   BENCH_ARGS=--quick bash bench/gpu_session.sh bench   # about 2 min
#
# Phases run in the order given (a device tool with a per-command limit runs them one per
# call; the build must come first on a fresh machine). Raw outputs: $OUT (default
# bench/out/gpu/session-<UTC date>): env.txt, build.txt, pytest_gpu.txt, bench_gpu.txt,
# bench_gpu_sim.txt, gpu.json, gpu_sim.json. Exit status: the first failing phase's.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/out/gpu/session-$(date -u +%Y%m%d)}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 AUTOTILE_BENCH_OUT=$OUT
PHASES=("$@")
[ ${#PHASES[@]} -eq 0 ] && PHASES=(build test bench)
status=0

env_info() {
  { date -u; git rev-parse HEAD 2>/dev/null
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    python3 -c "import sys, numpy; print('python', sys.version.split()[0], 'numpy', numpy.__version__)"
    python3 -c "import cupy; print('cupy', cupy.__version__, 'cuda runtime', cupy.cuda.runtime.runtimeGetVersion())"
    python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
  } >> "$OUT/env.txt" 2>&1
}

installed() {  # the package a plain `import autotile` finds outside this tree (the fresh build)
  (cd /tmp && python3 -c "import autotile, autotile._core as c; print(autotile.__file__, c.__file__)")
}

for phase in "${PHASES[@]}"; do
  case "$phase" in
    build)
      env_info
      # a core built elsewhere and left in the tree would shadow the fresh build in the tests
      if ls python/autotile/_core*.so >/dev/null 2>&1; then
        echo "python/autotile/_core*.so exists in the tree: move it away for a fresh-build session" | tee -a "$OUT/build.txt"
        [ $status -eq 0 ] && status=2; continue
      fi
      # the GPU machine may be offline: nothing is downloaded (--no-deps, no build isolation);
      # say which build and runtime modules are missing before pip does
      python3 - >> "$OUT/build.txt" 2>&1 <<'PY'
import importlib.util
need = ["scikit_build_core", "Cython", "cmake", "numpy", "threadpoolctl", "ml_dtypes", "cupy", "torch"]
missing = [m for m in need if importlib.util.find_spec(m) is None]
print("preflight: missing modules:", missing or "none")
PY
      start=$(date +%s)
      timeout "${BUILD_TIMEOUT:-580}" python3 -m pip install --no-build-isolation --no-deps -v . >> "$OUT/build.txt" 2>&1
      rc=$?
      echo "build rc=$rc in $(( $(date +%s) - start )) s" | tee -a "$OUT/build.txt"
      installed 2>&1 | tee -a "$OUT/build.txt"
      [ $rc -ne 0 ] && [ $status -eq 0 ] && status=$rc
      ;;
    test)
      start=$(date +%s)
      timeout "${PT_TIMEOUT:-580}" python3 -m pytest -m gpu tests/gpu -rs -p no:cacheprovider --durations=15 \
        ${PYTEST_ARGS:-} > "$OUT/pytest_gpu.txt" 2>&1
      rc=$?
      echo "pytest rc=$rc in $(( $(date +%s) - start )) s ($(installed 2>&1))" >> "$OUT/pytest_gpu.txt"
      tail -4 "$OUT/pytest_gpu.txt"
      [ $rc -ne 0 ] && [ $status -eq 0 ] && status=$rc
      ;;
    bench)
      start=$(date +%s)
      timeout "${BENCH_TIMEOUT:-500}" python3 -m autotile.bench.gpu --torch on ${BENCH_ARGS:-} 2>&1 \
        | tee "$OUT/bench_gpu.txt"
      rc=${PIPESTATUS[0]}
      timeout 120 python3 -m autotile.bench.gpu --sim --quick --steps 10 2>&1 | tee "$OUT/bench_gpu_sim.txt"
      echo "bench rc=$rc in $(( $(date +%s) - start )) s" | tee -a "$OUT/bench_gpu.txt"
      [ $rc -ne 0 ] && [ $status -eq 0 ] && status=$rc
      ;;
    *)
      echo "unknown phase '$phase' (build, test, bench)"; exit 2 ;;
  esac
done
exit $status
