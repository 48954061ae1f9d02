# The two entry points of the README: `make demo` (main job) and `make test`.
# Each creates .venv and installs requirements.txt on first use (or when it changes).
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

BEAM_VENV := .venv-beam
BEAM_STAMP := $(BEAM_VENV)/.installed-stamp

.PHONY: demo test test-onednn-off test-avx2-onednn test-slow test-beam test-oracle test-keras-hub bench clean-venv

$(STAMP): requirements.txt
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -r requirements.txt
	touch $(STAMP)

demo: $(STAMP)
	$(VPY) demo.py

# The default suite runs in TEST_WORKERS processes (pytest-xdist), each test file in one of
# them; most of a test's time is single-threaded Python and tracing, so two processes on two
# cores halve the wall time. The slow suite stays serial: its Ctrl-C and kill tests time
# their children.
TEST_WORKERS ?= 2

test: $(STAMP)
	$(VPY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=10 -m "not slow" tests

# The tests whose paths depend on oneDNN, again with oneDNN off: what TensorFlow runs on
# AVX2-only CPUs when TF_ENABLE_ONEDNN_OPTS=0 (and ran there by default before albert-tf
# turned it on), so that a CI machine with AVX-512 checks those paths too.
ONEDNN_TESTS := tests/kernels/test_onednn.py tests/kernels/test_tf_internals.py \
	tests/kernels/test_fused_ops.py tests/kernels/test_precision.py \
	tests/modeling/test_performance_paths.py tests/modeling/test_numerics.py \
	tests/export/test_saved_model.py

test-onednn-off: $(STAMP)
	TF_ENABLE_ONEDNN_OPTS=0 $(VPY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow" $(ONEDNN_TESTS)

# The same tests as an AVX2-only CPU runs them under albert-tf's choice: oneDNN on, its
# kernels (and XLA's) capped at AVX2. Without the bf16 tests: TensorFlow still sees this
# CPU's AVX-512 and sends bf16 to oneDNN, which the cap makes abort (a real AVX2 CPU sends
# bf16 to Eigen instead).
AVX2_CAPS := ONEDNN_MAX_CPU_ISA=AVX2 XLA_FLAGS=--xla_cpu_max_isa=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2

test-avx2-onednn: $(STAMP)
	$(AVX2_CAPS) TF_ENABLE_ONEDNN_OPTS=1 $(VPY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile \
		-m "not slow" -k "not bf16 and not bfloat16 and not mixed_precision and not resident and not measure_gemm" \
		$(ONEDNN_TESTS)

test-slow: $(STAMP)
	$(VPY) -m pytest -q -m slow tests

# data_prep's Beam pipeline against the local runner (byte-identical output): on the
# DirectRunner, and on the DaskRunner against a localhost dask.distributed cluster the tests
# start (a scheduler and two workers), once with a worker killed mid-run.
$(BEAM_STAMP): requirements-beam.txt
	test -x $(BEAM_VENV)/bin/python || $(PYTHON) -m venv $(BEAM_VENV)
	$(BEAM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BEAM_VENV)/bin/python -m pip install --quiet -r requirements-beam.txt
	touch $(BEAM_STAMP)

test-beam: $(BEAM_STAMP)
	$(BEAM_VENV)/bin/python -m pytest -q tests/data_prep/test_beam_pipeline.py \
		tests/data_prep/test_beam_dask.py

# albert-tf's pipelines against transformers' (torch CPU, its own venv: the oracle program
# runs there; the test itself runs in .venv).
ORACLE_VENV := .venv-oracle
ORACLE_STAMP := $(ORACLE_VENV)/.installed-stamp

$(ORACLE_STAMP): requirements-oracle.txt
	test -x $(ORACLE_VENV)/bin/python || $(PYTHON) -m venv $(ORACLE_VENV)
	$(ORACLE_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(ORACLE_VENV)/bin/python -m pip install --quiet -r requirements-oracle.txt
	touch $(ORACLE_STAMP)

# sentence-transformers 6.x needs transformers 5.x: its own venv beside the 4.x one.
ORACLE_ST6_VENV := .venv-oracle-st6
ORACLE_ST6_STAMP := $(ORACLE_ST6_VENV)/.installed-stamp

$(ORACLE_ST6_STAMP): requirements-oracle-st6.txt
	test -x $(ORACLE_ST6_VENV)/bin/python || $(PYTHON) -m venv $(ORACLE_ST6_VENV)
	$(ORACLE_ST6_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(ORACLE_ST6_VENV)/bin/python -m pip install --quiet -r requirements-oracle-st6.txt
	touch $(ORACLE_ST6_STAMP)

test-oracle: $(STAMP) $(ORACLE_STAMP) $(ORACLE_ST6_STAMP)
	ALBERT_TF_ORACLE_PYTHON=$(abspath $(ORACLE_VENV))/bin/python \
	ALBERT_TF_ORACLE_ST6_PYTHON=$(abspath $(ORACLE_ST6_VENV))/bin/python \
	$(VPY) -m pytest -q -m oracle tests/pipelines

# Side-by-side performance against keras-hub and Hugging Face (optional peers, own venv).
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed-stamp
SUITE ?= quick

$(BENCH_STAMP): requirements.txt bench/requirements.txt
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -r requirements.txt -r bench/requirements.txt
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python bench/run.py --suite $(SUITE)

clean-venv:
	rm -rf $(VENV) $(BEAM_VENV) $(BENCH_VENV)

# keras-hub presets against keras-hub itself (it lives in .venv-bench with albert-tf's
# requirements; the default suite skips these tests).
test-keras-hub: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python -m pytest -q tests/keras_tasks/test_keras_hub_oracle.py
