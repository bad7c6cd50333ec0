#!/usr/bin/env bash
# C++ unit tests of the core (TDL, C API, ...) under AddressSanitizer + UndefinedBehavior-
# Sanitizer, through CTest. Needs cmake, a C/C++ compiler and GoogleTest
# (Debian: apt-get install libgtest-dev). Build directory: $AUTOTILE_CPP_BUILD_DIR, default
# build/cpp-tests (ignored by git), kept between runs so a rerun only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${AUTOTILE_CPP_BUILD_DIR:-build/cpp-tests}"
JOBS="${AUTOTILE_JOBS:-2}"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Debug -DAUTOTILE_BUILD_PYTHON=OFF \
  -DAUTOTILE_BUILD_TESTS=ON -DAUTOTILE_SANITIZE=ON
cmake --build "$BUILD_DIR" -j "$JOBS"
# detect_leaks: LeakSanitizer checks every test binary too; halt_on_error keeps the first report readable.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# --no-tests=error: a configure that silently skipped the tests (no GoogleTest) fails here.
ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error -j "$JOBS"
