# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint soak bench bench-full clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,bench,dev]"
	touch $(STAMP)

demo: install
	$(BIN)/python examples/demo.py

test: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -m "not slow"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Long random property runs (not in CI): HYPOTHESIS_PROFILE=soak, every test marked slow included.
soak: install
	HYPOTHESIS_PROFILE=soak $(BIN)/python -m pytest -p no:cacheprovider tests

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .benchmarks
