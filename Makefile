# Carcassonne Cloud — the commands a developer needs. Every target installs what it uses.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run run-cluster demo test test-hosts test-fast bench lint openapi clean

install: $(STAMP)

# Reinstall whenever the pinned dependencies change.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Redis, nginx, the command and query services, the workers and beats under supervisord until
# Ctrl-C (logs in var/log/; deploy/local/run.py --help).
run: install
	$(PY) -m deploy.local.run $(RUN_ARGS)

# The same on a 3-primary Redis Cluster (REDIS_PORT, +1, +2; the broker on +3), 2 command and
# 2 query instances behind nginx (each game routed to one instance), 2 worker processes, beat.
run-cluster: install
	$(PY) -m deploy.local.run --cluster $(RUN_ARGS)

# A game between bots through the HTTP API of a running `make run` (tools/demo.py --help).
demo: install
	$(PY) -m tools.demo $(DEMO_ARGS)

# The whole suite on TEST_WORKERS pytest-xdist workers: the tests mostly wait on real processes,
# so more workers than cores pays (tests/conftest.py: one group per module, slow ones first).
TEST_WORKERS ?= 4
test: install
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=25 $(PYTEST_ARGS)

# Faults on a real network (issue 31): the suite on hosts made of network namespaces (root;
# nftables installed with apt-get when missing), games played while primaries are partitioned,
# killed and paused and a command host is cut from Redis; prints a table per fault
# (tests/hosts/test_faults.py; HOSTS_REPS repetitions of each fault, 5). Not part of `make test`.
test-hosts: install
	$(PY) -m pytest tests/hosts -s --durations=5 $(PYTEST_ARGS)

# The edit-run loop: the unit tests and one game over HTTP scored by a real worker.
test-fast: install
	$(PY) -m pytest -n 2 --dist loadgroup -m "not integration or smoke" $(PYTEST_ARGS)

# Every benchmark runs even when an earlier one missed a target; any miss (or a benchmark that
# failed to finish) fails `make bench`. Speed targets are ratios to a baseline measured in the
# same run (tests/bench/targets.py); the benchmarks append every judged figure to the file
# named by BENCH_RESULTS, printed as one table at the end (tests/bench/summary.py).
BENCHES := engine schemas redis_client command instructions scoring changes thirdparty live proxy webhooks notify indexes hotspots instances cluster board page bots bot_timing lifecycle clocks abuse archive archive_lists fallthrough costly ratings bot_ratings matchmaking

bench: install
	@results=$$(mktemp); status=0; failed=""; for b in $(BENCHES); do \
	  echo "== tests/bench/bench_$$b.py"; \
	  BENCH_RESULTS=$$results $(PY) tests/bench/bench_$$b.py || { status=1; failed="$$failed $$b"; }; \
	done; \
	$(PY) tests/bench/summary.py $$results; rm -f $$results; \
	if [ $$status -ne 0 ]; then echo "make bench: exited non-zero:$$failed (see MISSED above)"; fi; \
	exit $$status

# services/common/openapi.json (docs/openapi.json links to it): the whole API's one document,
# rebuilt from both services' schemas
# (tests/integration/test_openapi.py fails when the served document and the file differ).
openapi: install
	$(PY) -m tools.openapi

lint: install
	$(PY) -m ruff check shared services tests deploy tools
	$(PY) -m ruff format --check shared services tests deploy tools
	$(PY) -m mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
