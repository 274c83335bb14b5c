#!/usr/bin/env bash
# make test-long: clang's thread-safety analysis over the whole tree,
# sanitizer builds of the C++ suite, bounded libFuzzer runs of the store's
# frame decoder and the TCP transport's receive path, and torch's own
# distributed tests under spawn and over TCP, and the wheel built from an
# sdist.
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

# The thread-safety analysis and the fuzz run build with clang, which the
# default (GCC) build does not need, so it is installed here, not by
# scripts/install-deps.sh: clang itself, and its sanitizer and libFuzzer
# runtimes (libclang-rt-dev), which apt's clang only recommends.
clang_packages=(clang libclang-rt-dev)
ensure_clang() {
  local missing=()
  for p in "${clang_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "test-long: installing ${missing[*]} (apt-get) for the thread-safety analysis and the fuzz run"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
      echo "test-long: cannot install ${missing[*]} as this user; as root run: apt-get install -y ${missing[*]}" >&2
      return 1
    fi
    sudo="sudo"
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
have_clang=1
ensure_clang || have_clang=0

# Every lock's GUARDED_BY/REQUIRES contract (src/common/thread_annotations.h)
# checked by clang: library, tests and tools, with any finding an error.
echo "== clang -Wthread-safety (build-clang) =="
if [[ $have_clang -eq 1 ]]; then
  if ! { cmake -S . -B build-clang -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
           -DMESHCOMM_THREAD_SAFETY_ANALYSIS=ON -DMESHCOMM_BUILD_PYTHON=OFF -DMESHCOMM_PYTHON=$PYTHON &&
         cmake --build build-clang -j "$JOBS"; }; then
    failed+=("clang thread-safety analysis (build-clang)")
  fi
else
  failed+=("clang thread-safety analysis: clang could not be installed")
fi

echo "== AddressSanitizer + UndefinedBehaviorSanitizer =="
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMESHCOMM_SANITIZE=address,undefined -DMESHCOMM_BUILD_PYTHON=OFF -DMESHCOMM_PYTHON=$PYTHON
cmake --build build-asan -j "$JOBS" --target meshcomm_tests
# The sanitizers slow every process down: the tests' bounds on whole
# multi-process jobs (not the library's own timeouts) grow to match.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  MESHCOMM_TEST_BOUND_SCALE=2 run_cpp_suite build-asan

echo "== libFuzzer: store frames and transport frames (${FUZZ_SECONDS:-120} s each) =="
if [[ $have_clang -eq 1 ]]; then
  make --no-print-directory fuzz FUZZ_SECONDS=${FUZZ_SECONDS:-120} || failed+=("fuzz run")
else
  echo "clang++ not found; skipping the fuzz run"
fi
# torch's own distributed tests, the whole list, with ranks started as
# torch starts them (spawn) and over TCP.
echo "== torch's distributed tests: spawn, and over TCP =="
make --no-print-directory venv build
for mode in "MESHCOMM_TORCH_SUITE_START=spawn" "MESHCOMM_SHM=0"; do
  (cd tests/torch/torch_suite && env "$mode" ../../../build/venv/bin/python -m pytest -q \
     -p no:cacheprovider -W ignore::DeprecationWarning test_torch_suite.py) ||
    failed+=("torch's distributed tests ($mode)")
done

# The wheel again, built from an sdist of this tree (python -m build
# --sdist, then pip wheel of the tarball: a full compile in a fresh build).
echo "== the wheel, from an sdist =="
(cd tests/packaging && MESHCOMM_PACKAGE_FROM=sdist "$PYTHON" -m pytest -q -p no:cacheprovider \
   test_wheel.py) || failed+=("the wheel from an sdist")

# ThreadSanitizer last: the full suite is the longest step (about 45 min on
# 2 cores).
echo "== ThreadSanitizer =="
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMESHCOMM_SANITIZE=thread -DMESHCOMM_BUILD_PYTHON=OFF -DMESHCOMM_PYTHON=$PYTHON
cmake --build build-tsan -j "$JOBS" --target meshcomm_tests
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp" MESHCOMM_TEST_BOUND_SCALE=3 \
  run_cpp_suite build-tsan

if [[ ${#failed[@]} -gt 0 ]]; then
  printf 'test-long: FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "test-long: all passed"
