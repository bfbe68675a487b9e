# costguard: `make demo` and `make test` set everything up from a fresh clone.
SHELL := /bin/bash
PYTHON ?= $(shell scripts/find-python 3.13)
SAM_PYTHON ?= python3
VENV := .venv
SAM_VENV := .venv-sam
CHECKOV_VENV := .venv-checkov
BIN := $(VENV)/bin
export SAM_CLI_TELEMETRY := 0
export AWS_DEFAULT_REGION ?= us-east-1
export COSTGUARD_SAM := $(CURDIR)/$(SAM_VENV)/bin/sam
export COSTGUARD_CHECKOV := $(CURDIR)/$(CHECKOV_VENV)/bin/checkov

.PHONY: setup test-setup demo build test lint typecheck unit bench bench-adaptive clean

$(VENV)/.ready: pyproject.toml constraints.txt
	@test -n "$(PYTHON)" || { echo "no Python 3.13 found: set PYTHON=/path/to/python3.13"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[local,dev]'
	touch $@

# The SAM CLI pins boto3 and pydantic: it lives in its own environment, never in the runtime set.
$(SAM_VENV)/.ready: requirements-sam.txt
	$(SAM_PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet --upgrade pip
	$(SAM_VENV)/bin/pip install --quiet -r requirements-sam.txt
	touch $@

# checkov pins many packages of its own: it too lives apart from the runtime set.
$(CHECKOV_VENV)/.ready: requirements-checkov.txt
	$(SAM_PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/pip install --quiet -r requirements-checkov.txt
	touch $@

# What deploying needs: the runtime and CLI (.venv) and the SAM CLI (.venv-sam). Nothing system-wide.
setup: $(VENV)/.ready $(SAM_VENV)/.ready

# What the tests add: checkov's environment and headless Chromium (the report rendering tests only; installed with
# apt when missing, so on Debian-like machines).
test-setup: setup $(CHECKOV_VENV)/.ready
	scripts/ensure-chromium

demo: $(VENV)/.ready
	$(BIN)/costguard demo

# `sam build` runs the functions' runtime, python3.13, from PATH: put the one scripts/find-python finds (PATH
# first, then pyenv's versions) in front, as tests/template/test_sam.py does. Extra flags: make build SAM_ARGS=...
build: $(SAM_VENV)/.ready
	@py="$$(scripts/find-python 3.13)" || exit 1; \
	PATH="$$(dirname "$$py"):$$PATH" $(SAM_VENV)/bin/sam build $(SAM_ARGS)

lint: $(VENV)/.ready
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.ready
	$(BIN)/mypy

# Independent tests run in parallel, one worker per core; a module's tests stay on one worker (its fixtures are
# built once) unless they are marked to run apart, and the slowest groups start first (tests/conftest.py).
unit: test-setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -n auto --dist loadgroup

test: lint typecheck unit

# Cloud Custodian, the cold-import benchmark's yardstick, in an environment of its own (bench/imports.py makes it
# too, if it is missing). It rewrites .ready only when the requirements change: the touch keeps the rule from
# running again at every `make bench` once a prerequisite is newer.
bench/.venv-c7n/.ready: bench/requirements-c7n.txt $(VENV)/.ready
	$(BIN)/python -c "import sys; sys.path.insert(0, '.'); from bench.imports import c7n_python; c7n_python()"
	touch $@

bench: $(VENV)/.ready bench/.venv-c7n/.ready
	$(BIN)/python bench/run.py

# The idle policies from day one, cold and after learning (a few minutes): bench/adaptive_cold.{json,md}.
bench-adaptive: $(VENV)/.ready
	$(BIN)/python bench/adaptive_cold.py

clean:
	rm -rf $(VENV) $(SAM_VENV) $(CHECKOV_VENV) bench/.venv-c7n .aws-sam .mypy_cache .ruff_cache
