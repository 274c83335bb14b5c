#!/usr/bin/env bash
# make test-long: sanitizer builds of the C++ suite, the Python suite under
# the release build, and bounded libFuzzer runs of the store's frame
# decoder and the TCP transport's receive path.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
JOBS=${JOBS:-$(nproc)}

# A failing suite does not stop the others: every step reports, and the
# script fails at the end if any did.
failed=()
run_cpp_suite() {
  local dir=$1
  echo "== C++ suite in $dir =="
  "$dir/bin/meshcomm_tests" --gtest_brief=1 || failed+=("C++ suite in $dir")
}

echo "== AddressSanitizer + UndefinedBehaviorSanitizer =="
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMESHCOMM_SANITIZE=address,undefined -DMESHCOMM_BUILD_PYTHON=OFF -DMESHCOMM_PYTHON=$PYTHON
cmake --build build-asan -j "$JOBS" --target meshcomm_tests
# The sanitizers slow every process down: the tests' bounds on whole
# multi-process jobs (not the library's own timeouts) grow to match.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  MESHCOMM_TEST_BOUND_SCALE=2 run_cpp_suite build-asan

echo "== ThreadSanitizer =="
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMESHCOMM_SANITIZE=thread -DMESHCOMM_BUILD_PYTHON=OFF -DMESHCOMM_PYTHON=$PYTHON
cmake --build build-tsan -j "$JOBS" --target meshcomm_tests
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 MESHCOMM_TEST_BOUND_SCALE=3 \
  run_cpp_suite build-tsan

echo "== libFuzzer: store frames and transport frames (${FUZZ_SECONDS:-120} s each) =="
if command -v clang++ >/dev/null; then
  make --no-print-directory fuzz FUZZ_SECONDS=${FUZZ_SECONDS:-120} || failed+=("fuzz run")
else
  echo "clang++ not found; skipping the fuzz run"
fi
if [[ ${#failed[@]} -gt 0 ]]; then
  printf 'test-long: FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "test-long: all passed"
