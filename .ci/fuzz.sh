#!/usr/bin/env bash
# Fuzzes the TDL parser and analysis (tests/fuzz/tdl_fuzz.cc) with libFuzzer under
# AddressSanitizer + UndefinedBehaviorSanitizer for a fixed time, starting from the seed
# corpus in tests/fuzz/tdl_corpus/ (read only; new inputs go to a scratch directory).
# Any crash, sanitizer report, non-autotile exception, hang (> 10 s per input) or memory use
# over 2 GB fails the run, and libFuzzer leaves the input as crash-*/timeout-*/oom-*.
# Needs clang and its libFuzzer runtime (Debian: clang-14 libclang-rt-14-dev).
# Environment: AUTOTILE_FUZZ_SECONDS (default 60), AUTOTILE_FUZZ_BUILD_DIR (build/fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN="${AUTOTILE_FUZZ_SECONDS:-60}"
BUILD_DIR="${AUTOTILE_FUZZ_BUILD_DIR:-build/fuzz}"
CLANGXX="$(command -v clang++-14 || command -v clang++ || true)"
CLANGC="$(command -v clang-14 || command -v clang || true)"
if [ -z "$CLANGXX" ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq clang-14 libclang-rt-14-dev >/dev/null
  CLANGXX="$(command -v clang++-14)"; CLANGC="$(command -v clang-14)"
fi
CXX="$CLANGXX" CC="$CLANGC" cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Debug \
  -DAUTOTILE_BUILD_PYTHON=OFF -DAUTOTILE_FUZZ=ON -DAUTOTILE_CUDA=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "${AUTOTILE_JOBS:-2}" --target tdl_fuzz
SCRATCH="$(mktemp -d)"
ARTIFACTS="$BUILD_DIR/fuzz-artifacts"
mkdir -p "$ARTIFACTS"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# -max_len 65536: long sums and deep nesting; -dict: TDL's keywords and punctuation.
"$BUILD_DIR/tdl_fuzz" -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -dict=tests/fuzz/tdl.dict \
  -artifact_prefix="$ARTIFACTS/" "$SCRATCH" tests/fuzz/tdl_corpus
rm -rf "$SCRATCH"
echo "tdl_fuzz: no finding in ${SECONDS_TO_RUN} s"
