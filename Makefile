# Carcassonne Cloud — the commands a developer needs. Every target installs what it uses.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test bench lint clean

install: $(STAMP)

# Reinstall whenever the pinned dependencies change.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: install
	$(PY) -m carcassonne demo

test: install
	$(PY) -m pytest

bench: install
	$(PY) tests/bench/bench_engine.py
	$(PY) tests/bench/bench_command.py
	$(PY) tests/bench/bench_scoring.py

lint: install
	$(PY) -m ruff check shared services tests
	$(PY) -m ruff format --check shared services tests
	$(PY) -m mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
