#!/usr/bin/env bash
# The C++ core and its Python module built with -D_GLIBCXX_ASSERTIONS and AddressSanitizer +
# UndefinedBehaviorSanitizer (GCC, -O1), and a sample of the Python suite run against it with
# the sanitizer runtime preloaded (issue 31: a core built by another compiler segfaulted where
# this machine's build passed; an out-of-range index or a use after free that one compiler's
# code happens to survive is a report here). Any sanitizer report, in pytest's process or in a
# process it starts, fails the run; the reports are printed at the end.
#
# The module is built in a copy of the working tree (tracked files and untracked ones git does
# not ignore), so an in-tree development build is neither used nor overwritten: the copy's
# tests/conftest.py picks the copy's module. Environment: AUTOTILE_SANITIZE_DIR (default
# build/sanitize-python; the object files are kept, so a rerun rebuilds only what changed),
# AUTOTILE_JOBS (2), CXX (g++), AUTOTILE_SANITIZE_TESTS (the sample, pytest arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
WORK="${AUTOTILE_SANITIZE_DIR:-$ROOT/build/sanitize-python}"
JOBS="${AUTOTILE_JOBS:-2}"
CXX="${CXX:-g++}"
PY="$(command -v python3)"
start=$SECONDS

# The sample (about 6 minutes on 2 cores under the sanitizers, after a 4-7 minute build of the
# core; 821 s in all on the shared 2-core dev machine with 2 more test files): the search and the
# refinement across cuts (its wide moves, truncated neighbourhoods and restarts), the DP
# against bruteforce, the execution graph's build, memory plan and swap planning, hierarchical
# collectives over random plans, the refinement on the time objective, and planned training
# steps on 2-8 devices (tofu and data, every execution-test model).
DEFAULT_TESTS=(
  tests/search/test_cut_refine.py
  tests/search/test_kcuts.py
  tests/search/test_dp_vs_bruteforce.py
  tests/search/test_elimination_reuse.py
  tests/search/test_coarsen_fold.py
  tests/execgraph/test_exec_models.py
  tests/execgraph/test_memory_plan.py
  tests/execgraph/test_arena_fit.py
  tests/execgraph/test_swap.py
  tests/execgraph/test_hierarchical_collectives.py
  tests/search/test_refine_time.py
  tests/planner/test_plan_api.py
  tests/planner/test_swap_search.py
)
if [ -n "${AUTOTILE_SANITIZE_TESTS:-}" ]; then
  read -r -a TESTS <<<"$AUTOTILE_SANITIZE_TESTS"
else
  TESTS=("${DEFAULT_TESTS[@]}")
fi

# The copy (tar keeps the files' times, so the kept objects stay valid where nothing changed).
SRC="$WORK/src"
rm -rf "$SRC"
mkdir -p "$SRC"
git ls-files -z --cached --others --exclude-standard \
  | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$SRC"

cmake -S "$SRC" -B "$WORK/obj" -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_CXX_FLAGS="-O1" -DAUTOTILE_SANITIZE=ON -DAUTOTILE_ASSERTIONS=ON -DAUTOTILE_CUDA=OFF \
  -DPython_EXECUTABLE="$PY" >/dev/null
cmake --build "$WORK/obj" -j "$JOBS" >/dev/null
ls "$SRC"/python/autotile/_core*.so >/dev/null
echo "sanitize-python: core built in $((SECONDS - start)) s"

# Python is not built with the sanitizers: their runtime comes first (LD_PRELOAD), with
# libstdc++ loaded before it starts, or ASan cannot find the real __cxa_throw.
REPORTS="$WORK/reports"
rm -rf "$REPORTS"
mkdir -p "$REPORTS"
export LD_PRELOAD="$("$CXX" -print-file-name=libasan.so) $("$CXX" -print-file-name=libstdc++.so)"
# detect_leaks=0: CPython's own allocations are not freed at exit.
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1:detect_stack_use_after_return=1:log_path=$REPORTS/asan"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$REPORTS/ubsan"
status=0
(cd "$SRC" && "$PY" -m pytest -p no:cacheprovider -m "not slow and not gpu" --durations=5 "${TESTS[@]}") || status=$?
unset LD_PRELOAD
if compgen -G "$REPORTS/*" >/dev/null; then
  echo "sanitize-python: sanitizer reports:"
  for f in "$REPORTS"/*; do
    echo "--- $f"
    head -c 20000 "$f"
  done
  status=1
fi
echo "sanitize-python: $((SECONDS - start)) s in all"
exit "$status"
