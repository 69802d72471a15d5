# The two commands a newcomer needs (see README): `make demo` and `make test`. Both set everything up first.
.PHONY: setup demo test test-fast bench

# Most tests wait on servers and child processes rather than compute, so more workers than cores pay; each test file
# stays on one worker (--dist loadfile), so a module's servers start once. `make test PYTEST_WORKERS=8` to change it.
PYTEST_WORKERS ?= 4

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/lucy demo

test: setup
	.venv/bin/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile

# The inner loop: unit and pipeline tests, no servers, browsers, cluster or child processes (tests/conftest.py marks
# those `services`).
test-fast: setup
	.venv/bin/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile -m "not services"

bench: setup
	.venv/bin/python bench/ingest.py
