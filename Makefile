# Two commands on a fresh clone:  `make run`  (sets up, runs the demo: server + worker + submitter)
#                                  `make test` (sets up, runs lint, types and the tests)
# `make run RUN_ARGS="--duration 15"` stops the demo on its own; `make example` runs the
# in-process library example (examples/quickstart.py).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUN_ARGS ?=

.PHONY: run example test lint typecheck unit docs docs-check bench sim clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q -U pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python examples/demo.py $(RUN_ARGS)

example: $(STAMP)
	$(BIN)/python examples/quickstart.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples conftest.py docs/hooks scripts
	$(BIN)/ruff format --check src tests bench examples conftest.py docs/hooks scripts

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

docs-check: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir .site

test: lint typecheck docs-check unit

bench: $(STAMP)
	$(BIN)/python bench/throughput.py

sim: $(STAMP)
	$(BIN)/python -m tests.sim --soak

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
