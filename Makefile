# The two commands a newcomer needs (see README): `make demo` and `make test`. Both set everything up first.
.PHONY: setup demo test test-fast bench

# `make test` runs the suite in one process by default: on this 2-core machine four xdist workers took it from ~27 to
# ~18 minutes, but under that load a few cluster and isolation tests outwait their limits, so CI keeps the serial
# run. `make test PYTEST_WORKERS=4` runs it in parallel (each test file on one worker, --dist loadfile, so a module's
# servers start once). The fast lane is parallel.
PYTEST_WORKERS ?= 0
FAST_WORKERS ?= 4

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/lucy demo

test: setup
	.venv/bin/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile

# The inner loop: unit and pipeline tests, no servers, browsers, cluster or child processes (tests/conftest.py marks
# those `services`).
test-fast: setup
	.venv/bin/python -m pytest -q -n $(FAST_WORKERS) --dist loadfile -m "not services"

bench: setup
	.venv/bin/python bench/ingest.py
