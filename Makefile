# Every target does its own (idempotent) set-up first: `make demo` and `make test` work
# on a fresh machine.
.PHONY: setup test test-fast demo figures constraints

setup:
	bash scripts/setup.sh

test: setup
	.venv/bin/python -m pytest -q

test-fast: setup
	.venv/bin/python -m pytest -q -m "not slow"

# the main job runs the set-up itself, as its first stage, and builds llama.cpp's server beside its training
demo:
	bash scripts/main_job.sh

figures: setup
	.venv/bin/specdec figures --out figures

# Freeze the .venv's versions into constraints.txt (after a passing `SPECDEC_CONSTRAINTS=none make test`
# on a fresh .venv: the refresh in constraints.txt's header); the header's comments are kept.
constraints:
	{ grep '^#' constraints.txt; .venv/bin/python -m pip freeze --exclude-editable | grep -v '^#' \
	  | sed 's/^torch==\(.*\)+cpu$$/torch==\1/'; } > constraints.txt.new && mv constraints.txt.new constraints.txt
	@echo "wrote constraints.txt; update its 'Passed:' line and commit it"
