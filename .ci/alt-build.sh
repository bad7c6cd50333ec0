#!/usr/bin/env bash
# The core built a second way (issue 31): clang++ at -O3 with -D_GLIBCXX_ASSERTIONS (another
# compiler's optimiser and libstdc++'s index checks), and a short smoke sample of the Python
# suite against it. A core that only one compiler's code runs correctly (undefined behaviour
# that GCC's code happened to survive) fails here or in .ci/sanitize-python.sh.
#
# Built in a copy of the working tree as .ci/sanitize-python.sh does. Environment:
# AUTOTILE_ALT_BUILD_DIR (default build/alt-build), AUTOTILE_JOBS (2), AUTOTILE_ALT_CXX
# (default clang++; installed from Debian when missing), AUTOTILE_ALT_TESTS (pytest arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
WORK="${AUTOTILE_ALT_BUILD_DIR:-$ROOT/build/alt-build}"
JOBS="${AUTOTILE_JOBS:-2}"
PY="$(command -v python3)"
start=$SECONDS
ALT_CXX="${AUTOTILE_ALT_CXX:-$(command -v clang++ || command -v clang++-14 || true)}"
if [ -z "$ALT_CXX" ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq clang >/dev/null
  ALT_CXX="$(command -v clang++)"
fi
if [ -z "$ALT_CXX" ]; then
  echo "alt-build: no clang++ (set AUTOTILE_ALT_CXX)" >&2
  exit 1
fi

SRC="$WORK/src"
rm -rf "$SRC"
mkdir -p "$SRC"
git ls-files -z --cached --others --exclude-standard \
  | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$SRC"
cmake -S "$SRC" -B "$WORK/obj" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$ALT_CXX" \
  -DCMAKE_CXX_FLAGS_RELEASE="-O3 -DNDEBUG" -DAUTOTILE_ASSERTIONS=ON -DAUTOTILE_CUDA=OFF \
  -DPython_EXECUTABLE="$PY" >/dev/null
cmake --build "$WORK/obj" -j "$JOBS" >/dev/null
ls "$SRC"/python/autotile/_core*.so >/dev/null
echo "alt-build: core built by $ALT_CXX -O3 -D_GLIBCXX_ASSERTIONS in $((SECONDS - start)) s"

if [ -n "${AUTOTILE_ALT_TESTS:-}" ]; then
  read -r -a TESTS <<<"$AUTOTILE_ALT_TESTS"
else
  TESTS=(tests/search/test_cut_refine.py tests/search/test_kcuts.py tests/search/test_zoo_plans.py
         tests/search/test_dp_vs_bruteforce.py tests/execgraph/test_memory_plan.py
         tests/execgraph/test_exec_models.py tests/execgraph/test_swap.py tests/planner/test_plan_api.py)
fi
status=0
(cd "$SRC" && "$PY" -m pytest -p no:cacheprovider -m "not slow and not gpu" "${TESTS[@]}") || status=$?
echo "alt-build: $((SECONDS - start)) s in all"
exit "$status"
