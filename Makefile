# Every target does its own (idempotent) set-up first: `make demo` and `make test` work
# on a fresh machine.
.PHONY: setup test test-fast demo figures

setup:
	bash scripts/setup.sh

test: setup
	.venv/bin/python -m pytest -q

test-fast: setup
	.venv/bin/python -m pytest -q -m "not slow"

demo: setup
	bash scripts/main_job.sh

figures: setup
	.venv/bin/specdec figures --out figures
