# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint soak bench bench-full bench-instructions clean
BENCH := -p no:cacheprovider --benchmark-columns=median,rounds --benchmark-sort=name

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

# Benchmarks against the stock InMemorySaver and SqliteSaver; results, ratios and plots in benchmarks/results/.
bench: install
	$(BIN)/python -m pytest benchmarks -m "not slow" --benchmark-max-time=0.05 --benchmark-min-rounds=5 $(BENCH) \
		--benchmark-json=benchmarks/results/short.json
	$(BIN)/python benchmarks/report.py benchmarks/results/short.json benchmarks/results/short

bench-full: install
	$(BIN)/python -m pytest benchmarks --benchmark-max-time=1 $(BENCH) --benchmark-json=benchmarks/results/full.json
	$(BIN)/python benchmarks/report.py benchmarks/results/full.json benchmarks/results/full

# CPU instructions per operation, counted by valgrind (not in CI: about 10 minutes; needs valgrind).
bench-instructions: install
	$(BIN)/python benchmarks/instruction_counts.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .benchmarks
