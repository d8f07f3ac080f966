# Two commands on a fresh clone:  `make run`  (sets up, runs the bundled example)
#                                  `make test` (sets up, runs lint, types and the tests)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck unit bench sim clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q -U pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python examples/quickstart.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python bench/throughput.py

sim: $(STAMP)
	$(BIN)/python -m tests.sim --soak

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
