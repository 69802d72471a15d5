# The two commands a newcomer needs (see README): `make demo` and `make test`. Both set everything up first.
.PHONY: setup demo test bench

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/lucy demo

test: setup
	.venv/bin/python -m pytest -q

bench: setup
	.venv/bin/python bench/ingest.py
