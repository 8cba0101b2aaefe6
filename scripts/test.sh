#!/usr/bin/env bash
# Installs dependencies, builds kcl-cpp with warnings as errors and runs every test; then
# builds again with AddressSanitizer + UndefinedBehaviorSanitizer and runs every test there.
#   scripts/test.sh            both builds
#   KCL_SKIP_SANITIZE=1 ...    only the plain build
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
bash scripts/install-deps.sh
jobs="${KCL_JOBS:-$(nproc)}"

run_suite() {  # name, extra cmake args...
  local name="$1"; shift
  local dir="build/$name"
  echo "=== kcl-cpp: $name build ==="
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKCL_WERROR=ON \
    -DKCL_UNITY_TESTS=ON "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  echo "=== kcl-cpp: $name tests ==="
  (cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 900 "${KCL_CTEST_ARGS[@]}")
}

# The release run includes the short fault scenario (label "fault", multi-process, about two
# minutes); the sanitizer run covers the unit and integration tests. The sanitizer build
# compiles at -O1 with line tables only (-g1): reports keep their file:line stack traces and
# the build takes well under half the time of -O2 -g (81 s against 31 s for the largest test
# file), which keeps the whole run inside CI's budget.
# The test sources themselves (KCL_TEST_COMPILE_OPTIONS) compile at -O1 -g1 in the release run,
# as the whole sanitizer build does: the library is built as configured, and the tests' own
# code, which needs no optimisation, compiles in about half the time (one test file: 19.8 s at
# -O2 -g, 11.1 s at -O1 -g1). Not lower: an inline function both a test and the library use
# is linked once, from the first object that has it (a test's), so test code at -O0 under the
# sanitizers slowed the library's own calls (a lease simulation test: 41.7 s to 87.6 s). Each test
# executable is a unity build (KCL_UNITY_TESTS: up to 8 of its files a translation unit), which
# compiles the tests' shared headers once per batch: 2.7x less compile time for
# integration_worker. The test sources' compile time fell 3.2x in the release run and by a
# third in the sanitizer run (unity alone there); docs/testing.md has the figures.
KCL_CTEST_ARGS=()
run_suite release "-DKCL_TEST_COMPILE_OPTIONS=-O1;-g1"
if [ "${KCL_SKIP_SANITIZE:-0}" != "1" ]; then
  KCL_CTEST_ARGS=(-LE fault)
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite sanitize -DKCL_SANITIZE=ON -DKCL_BUILD_BENCH=OFF \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
fi
echo "=== kcl-cpp: all tests passed ==="
