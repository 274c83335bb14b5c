# meshcomm front door. `make demo` and `make test` work on a fresh Debian 12
# machine: both install what is missing, build, and run.
PYTHON ?= /usr/bin/python3
BUILD ?= build
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

export PYTHONPATH := $(CURDIR)/$(BUILD)/python$(if $(PYTHONPATH),:$(PYTHONPATH))
export PYTHONDONTWRITEBYTECODE := 1
# Where the tests' failed operations write their flight recorders (tests
# that check the dumps choose their own directories).
TEST_DUMPS = MESHCOMM_DUMP_DIR=$(CURDIR)/$(BUILD)/test-dumps

VENV ?= $(BUILD)/venv
VENV_PYTHON := $(VENV)/bin/python

.PHONY: all deps venv configure build test test-cpp test-python test-python-tcp test-torch test-launchers test-packaging test-long demo install wheel fuzz clean

all: build

deps:
	@bash scripts/install-deps.sh

# torch 2.x (PyPI) in a virtual environment that still sees Debian's packages.
venv: deps
	@bash scripts/make-venv.sh $(PYTHON) $(VENV)

# Every target that compiles installs (or checks for) its prerequisites
# first, so `make build` works on a fresh machine too.
# The venv comes first: the torch backend's native part is built against
# its torch (cmake/torch_native.cmake).
$(BUILD)/CMakeCache.txt: | deps venv
	cmake -S . -B $(BUILD) -G Ninja -DMESHCOMM_PYTHON=$(PYTHON) \
	  -DMESHCOMM_TORCH_PYTHON=$(CURDIR)/$(VENV_PYTHON) $(CMAKE_FLAGS)

configure: $(BUILD)/CMakeCache.txt

build: deps configure
	cmake --build $(BUILD) -j $(JOBS)

test: deps build
	$(MAKE) --no-print-directory test-cpp test-python test-python-tcp test-torch test-launchers \
	  test-packaging

test-cpp:
	$(TEST_DUMPS) $(BUILD)/bin/meshcomm_tests --gtest_brief=1

test-python:
	cd tests/python && $(TEST_DUMPS) $(PYTHON) -m pytest -q -p no:cacheprovider .
	$(PYTHON) -m pytest -q -p no:cacheprovider bench/test_percell.py bench/test_latency_breakdown.py  # the comparison's verdicts, the breakdown's split

# The Python suite again with shared memory off, so the ranks of this host
# talk over TCP (test_transport_choice.py checks that they do). The store's
# and the launcher's tests make no process group, so they run once.
test-python-tcp:
	cd tests/python && $(TEST_DUMPS) MESHCOMM_SHM=0 $(PYTHON) -m pytest -q -p no:cacheprovider \
	  --ignore=test_store.py --ignore=test_meshrun.py .

# The torch.distributed backend (meshcomm.torch) on the venv's torch 2.x,
# with torch's own distributed tests (tests/torch/torch_suite: every test
# gloo passes at 2 ranks, about 2 minutes); the operations, failures and
# the quick part of torch's tests again over TCP (shared memory off).
test-torch: venv build
	cd tests/torch && $(CURDIR)/$(VENV_PYTHON) -m pytest -q -p no:cacheprovider \
	  -W ignore::DeprecationWarning .
	cd tests/torch && MESHCOMM_SHM=0 MESHCOMM_TORCH_SUITE=quick $(CURDIR)/$(VENV_PYTHON) -m pytest \
	  -q -p no:cacheprovider -W ignore::DeprecationWarning test_ops.py test_faults.py \
	  torch_suite/test_torch_suite.py
	# The Python path alone, as a backend without its native part runs.
	cd tests/torch && MESHCOMM_TORCH_NATIVE=0 MESHCOMM_TORCH_SUITE=quick $(CURDIR)/$(VENV_PYTHON) \
	  -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning test_ops.py test_async.py \
	  test_faults.py test_native.py torch_suite/test_torch_suite.py

# One script under real launchers: srun and sbatch on a one-node Slurm
# cluster the tests start, mpirun, MPICH's mpiexec, torchrun (the venv's
# torch 2), meshrun.
test-launchers: venv
	cd tests/launchers && $(PYTHON) -m pytest -q -p no:cacheprovider .

# meshcomm as users install it: the wheel pip builds from this tree, installed
# into a fresh venv and used under meshrun, mpirun, srun and torchrun (about
# 5 minutes, most of it compiling); the C++ package from `cmake --install`,
# built against through CMake and pkg-config.
test-packaging: build
	cd tests/packaging && MESHCOMM_BUILD_DIR=$(CURDIR)/$(BUILD) $(PYTHON) -m pytest -q \
	  -p no:cacheprovider .

# Sanitizer builds, long sweeps and soaks: run before resolving an issue.
test-long: deps
	bash scripts/test-long.sh

demo: deps build
	bash scripts/demo.sh

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# The Python wheel into $(BUILD)/dist (pip install . installs the same).
wheel: deps
	$(PYTHON) -m pip wheel --no-deps -w $(BUILD)/dist --config-settings=build-dir=$(BUILD)/wheel-build .

# libFuzzer targets (clang): the store's frame decoder and the TCP
# transport's receive path, each run for FUZZ_SECONDS (default 60).
fuzz: deps
	cmake -S . -B $(BUILD)-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
	  -DMESHCOMM_BUILD_FUZZERS=ON -DMESHCOMM_BUILD_TESTS=OFF -DMESHCOMM_BUILD_PYTHON=OFF
	cmake --build $(BUILD)-fuzz -j $(JOBS)
	$(BUILD)-fuzz/bin/fuzz_store_frame -max_total_time=$${FUZZ_SECONDS:-60} -rss_limit_mb=2048
	$(BUILD)-fuzz/bin/fuzz_transport_frame -max_total_time=$${FUZZ_SECONDS:-60} -rss_limit_mb=2048

clean:
	rm -rf $(BUILD) $(BUILD)-fuzz $(BUILD)-asan $(BUILD)-tsan $(BUILD)-clang
