# `make demo` and `make test` each bootstrap .venv on a fresh machine (Python 3.11 + pip from the registries).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONUNBUFFERED := 1

.PHONY: demo test lint format bench clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/served_translator.py --out demo

test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" tests

lint: $(STAMP)
	$(BIN)/ruff check keras_attn tests examples benchmarks
	$(BIN)/ruff format --check keras_attn tests examples benchmarks

format: $(STAMP)
	$(BIN)/ruff format keras_attn tests examples benchmarks

clean:
	rm -rf $(VENV) demo .pytest_cache
