# `make check` runs the main job, `make test` the l0 + l1 tiers. Each sets itself up:
# a .venv is created when missing and `-e .[all,dev]` installed (skipped while the stamp
# is newer than pyproject.toml).
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.xvendor-installed
# Some machines cap pip at torch<=2.14.1 through a global pip config; xvendor needs 2.15.
export PIP_CONFIG_FILE := /dev/null

.PHONY: check test install clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[all,dev]'
	@touch $(STAMP)

check: $(STAMP)
	$(VENV)/bin/xvendor check

test: $(STAMP)
	$(PY) -m pytest -m "l0 or l1" $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
