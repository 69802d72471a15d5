# The two commands a newcomer needs (see README): `make demo` and `make test`. Both set everything up first.
.PHONY: setup demo test test-fast bench

# `make test` runs the suite on three xdist workers (~14.5 minutes on 2 quiet cores; `PYTEST_WORKERS=0`: one process,
# ~27 before stop 42): each test file is one group on one worker (--dist loadgroup, scheduled by tests/conftest.py
# FileGroups, so a module's servers start once), and the few heavy files (tests/conftest.py: HEAVY_FILES, a Ray
# cluster or many streams at once) share one group, run one after another and first.
PYTEST_WORKERS ?= 3
FAST_WORKERS ?= 4

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/lucy demo

test: setup
	.venv/bin/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup --durations=25

# The inner loop: unit and pipeline tests, no servers, browsers, cluster or child processes (tests/conftest.py marks
# those `services`).
test-fast: setup
	.venv/bin/python -m pytest -q -n $(FAST_WORKERS) --dist loadfile -m "not services"

bench: setup
	.venv/bin/python bench/ingest.py
