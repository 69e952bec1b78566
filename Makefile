# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# fastapi-langgraph-server needs Python 3.12+ (the project: 3.11+), so its test serves it from a venv of its own.
SERVER_VENV ?= .venv-fastapi-server
SERVER_STAMP := $(SERVER_VENV)/.installed
PYTHON312 ?= $(shell for candidate in python3.12 python3.13 python3.14 $(wildcard $(HOME)/.pyenv/versions/3.1[2-9]*/bin/python3); do \
	$$candidate -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1 && { echo $$candidate; break; }; done)
# Test workers: pytest-xdist, one per core (each module's tests stay on one worker: its servers start once).
WORKERS ?= auto

.PHONY: install install-demo install-server demo test lint typecheck docs soak bench bench-full bench-instructions bench-memory bench-tiered bench-retention bench-compression bench-concurrency limits overload clean
BENCH := -p no:cacheprovider --benchmark-columns=median,rounds --benchmark-sort=name

# The project's venv (Python 3.11+), in two steps, so that `make demo` waits only for what the demo needs (the
# package and LangGraph) and `make test` adds the rest (test, bench, dev and docs extras). Only the
# fastapi-langgraph-server test needs the 3.12 venv, so only `make test` builds it.
# The package is installed editable in setuptools' strict mode: a tree of links to saver/, engine/ and examples/ under
# build/, laid out as installed (langgraph/checkpoint/bounded/...), which type checkers and editors can read. A module
# added or removed needs the tree made again: the install targets do it whenever the list of files changed.
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed
PACKAGE_FILES := $(VENV)/.package-files
define refresh_package_tree
	@ls saver/*.py saver/tiered/*.py saver/tiered/retention/*.py saver/tiered/backends/*.py engine/*.py examples/*.py examples/serving/* > $(PACKAGE_FILES).now
	@cmp -s $(PACKAGE_FILES).now $(PACKAGE_FILES) || { \
		$(BIN)/python -m pip install --quiet --no-deps -e . --config-settings editable_mode=strict && \
		mv $(PACKAGE_FILES).now $(PACKAGE_FILES); }
	@rm -f $(PACKAGE_FILES).now
endef

install-demo: $(DEMO_STAMP)
	$(refresh_package_tree)

install: $(STAMP)
	$(refresh_package_tree)

install-server: $(SERVER_STAMP)

$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[demo]" --config-settings editable_mode=strict
	rm -f $(PACKAGE_FILES)
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml $(DEMO_STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[demo,test,bench,dev,docs]" \
		--config-settings editable_mode=strict
	rm -f $(PACKAGE_FILES)
	touch $(STAMP)

$(SERVER_STAMP): pyproject.toml
	@test -n "$(PYTHON312)" || { echo "fastapi-langgraph-server needs Python 3.12+; none found: make PYTHON312=/path/to/python3.12"; exit 1; }
	$(PYTHON312) -m venv $(SERVER_VENV)
	$(SERVER_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e ".[fastapi-server]"
	touch $(SERVER_STAMP)

demo: install-demo
	$(BIN)/python examples/demo.py

test: install install-server
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -m "not slow" -n $(WORKERS) --dist loadfile

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy --strict and pyright on the package as installed, and on the README's Python examples as a user's script
# (tests/contract/test_typing.py, also part of `make test`).
typecheck: install
	$(BIN)/python -m pytest -p no:cacheprovider tests/contract/test_typing.py

# The documentation site: mkdocs build --strict into site/ (a broken link or anchor, a page missing from the nav or
# an API reference that does not resolve fails it).
# NO_MKDOCS_2_WARNING: Material for MkDocs prints a banner about its end of life on every build otherwise.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

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

# Heap and RSS against max_total_bytes and max_memory_bytes, payloads of 16 B to 64 KB (about five minutes).
bench-memory: install
	$(BIN)/python benchmarks/memory_bound.py

# Turns each shape of graph gets on one thread before a limit refuses a write (about two minutes).
limits: install
	$(BIN)/python benchmarks/real_graph_limits.py

# Concurrent runs against a full store, with and without eviction_grace_seconds (about a minute).
overload: install
	$(BIN)/python benchmarks/overload.py

# TieredSaver over a throwaway PostgreSQL 15 and SQLite files, against the savers alone (about five minutes).
bench-tiered: install
	$(BIN)/python benchmarks/tiered.py

# Retention over a long workload on PostgreSQL 15 and SQLite: size over time, turn latency, sweep cost
# (about half an hour; --quick in under a minute).
bench-retention: install
	$(BIN)/python benchmarks/retention.py $(BENCH)

# CompressingSerializer's cost and savings, value size by value size (about a minute), then compression on and off
# side by side over SQLite and PostgreSQL and in the memory saver (benchmarks/bytes.py, a few minutes; issue 35):
# results/compression/RESULTS.md and BYTES.md.
bench-compression: install
	$(BIN)/python benchmarks/compression.py
	$(BIN)/python benchmarks/bytes.py

# Concurrent conversations (C = 1, 10, 50, 200; asyncio tasks and threads) over a throwaway PostgreSQL 15: the
# savers alone and TieredSaver in both write modes, throughput, tails, CPU, rows and bytes a turn (issue 34;
# 10 to 20 minutes, 2 minutes more a stalled cell; BENCH_QUICK=1 for C = 1 and 10, one round): results/concurrency/.
bench-concurrency: install
	$(BIN)/python benchmarks/concurrency.py

# CPU instructions per operation, counted by valgrind (not in CI: about 10 minutes; needs valgrind).
bench-instructions: install
	$(BIN)/python benchmarks/instruction_counts.py

clean:
	rm -rf $(VENV) $(SERVER_VENV) .pytest_cache .hypothesis .benchmarks build site
