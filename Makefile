# dpsim — the two commands: `make figures` (main job) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# One BLAS thread: the simulator vectorizes over trials itself, and multi-threaded BLAS on small
# batched SVDs oversubscribes a 2-core machine (measured 20x slower for pdp_sgd).
export OMP_NUM_THREADS ?= 1
export OPENBLAS_NUM_THREADS ?= 1

.PHONY: all install test test-fast smoke figures full gallery gallery-status bench gpu-check mutation docs clean

all: figures

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

# The suite on every core (pytest-xdist; TEST_WORKERS=0 runs it in one process). The tests that read
# the all-experiments run form one xdist group (tests/conftest.py), so it is made once.
TEST_WORKERS ?= auto

test: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

# The inner loop: the suite without the tests listed in tests/slow_tests.txt (those that took >= 2 s
# in a measured full run; tools/slow_tests.py regenerates the list from a --junitxml run) and
# without the tests of the all-experiments run (tests/conftest.py marks both `slow`).
test-fast: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m "not slow"

# The core install (no extras) on Python 3.12 and 3.13: a wheel of this checkout in a fresh venv
# under build/, a private run, its ε and calibration, and the missing-extra messages
# (tools/smoke.sh, tools/smoke_check.py).  SMOKE_PYTHONS picks the versions.
SMOKE_PYTHONS ?= 3.12 3.13

smoke:
	bash tools/smoke.sh $(SMOKE_PYTHONS)

figures: $(STAMP)
	$(VENV)/bin/dpsim reproduce --all --scale quick $(if $(WORKERS),--workers $(WORKERS))

# The full-scale reproduction (hours: cells are cached as they finish, so an interrupted run goes
# on where it stopped), its progress, and its publication as the committed gallery docs/gallery/.
FULL_RESULTS ?= results
FULL_OUT     ?= paper_figures/full

full: $(STAMP)
	nice $(VENV)/bin/dpsim reproduce --all --scale full --results $(FULL_RESULTS) --out $(FULL_OUT) $(if $(WORKERS),--workers $(WORKERS))

gallery-status: $(STAMP)
	$(VENV)/bin/dpsim gallery status --results $(FULL_RESULTS) --scale full --figures $(FULL_OUT)

gallery: $(STAMP)
	$(VENV)/bin/dpsim gallery publish --results $(FULL_RESULTS) --figures $(FULL_OUT) --out docs/gallery --source . $(if $(PARTIAL),--allow-partial)

# Benchmarks (one BLAS thread; ratios are measured within one run): machine limits, small-d table,
# workload W against its in-run noise ceiling, every variant vs dp_sgd, peak memory, correlated
# noise through the fused release vs the chain, simulate's overhead.  Each writes its JSON into one
# run folder, benchmarks/results/<UTC date>-<commit>[-dirty]/ (benchmarks/_record.py; BENCH_RESULTS
# redirects it), and tools/perf_page.py renders docs/performance.md from every run folder.
bench: $(STAMP)
	export BENCH_RUN=$${BENCH_RUN:-$$($(PY) benchmarks/_record.py --run-name)} && \
	OMP_NUM_THREADS=1 $(PY) benchmarks/machine_limits.py && \
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_small_d.py --quick && \
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_dp_sgd.py --steps 500 && \
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_variants.py && \
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_memory.py && \
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_correlated.py && \
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_overhead.py && \
	$(PY) tools/perf_page.py

# A GPU machine checked in minutes: the CuPy tests and workload W on the GPU against the CPU, the
# numbers in $(GPU_CHECK_JSON) (benchmarks/gpu_check.py; without CuPy or a CUDA device it says so
# in one line and fails).  CuPy missing: the gpu-cuda12 or gpu-cuda13 extra is installed first,
# chosen by the CUDA version of the driver that nvidia-smi reports.
GPU_CHECK_JSON ?= gpu-check.json

gpu-check: $(STAMP)
	@if ! $(PY) -c "import cupy" >/dev/null 2>&1; then \
	  cuda=$$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\).*/\1/p' | head -n 1); \
	  if [ -n "$$cuda" ]; then \
	    extra=gpu-cuda12; if [ "$$cuda" -ge 13 ]; then extra=gpu-cuda13; fi; \
	    echo "gpu-check: CuPy missing; driver CUDA $$cuda: pip install -e .[$$extra]"; \
	    $(PY) -m pip install --quiet -e ".[$$extra]" || exit 1; \
	  fi; \
	fi
	OMP_NUM_THREADS=1 $(PY) benchmarks/gpu_check.py --json $(GPU_CHECK_JSON)

# Mutation testing of the bounds modules of analysis/ (a sample of mutants; see tools/mutation.py)
mutation: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(PY) tools/mutation.py --sample 40 --json mutation.json --coverage-cache .mutation-coverage.json

# The documentation site (Sphinx + MyST; docs/conf.py says why) into build/docs/: the API reference,
# the optimizer catalogue generated from the registry, and the tutorials executed (no cache).
# Warnings are errors; every warning is listed (--keep-going) before the build fails.
# tests/project/test_docs.py runs the same build in the suite.
docs: $(STAMP)
	$(VENV)/bin/sphinx-build -W --keep-going -b html docs build/docs

clean:
	rm -rf $(VENV) paper_figures/out results .pytest_cache
