# `make check` runs the main job, `make test` the l0 + l1 tiers without the tests marked
# heavy (multi-minute trainers and drills; `make test HEAVY=only` runs just those, `HEAVY=run`
# everything; .ci/run and the CI matrix cells run them too). Each sets itself up:
# a .venv is created when missing and `-e .[all,dev,bench]` installed (skipped while the stamp
# is newer than pyproject.toml).
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.xvendor-installed
# Some machines cap pip at torch<=2.14.1 through a global pip config; xvendor needs 2.15.
export PIP_CONFIG_FILE := /dev/null
# Tiers `make test` runs (a CI cell passes its own: make test TIERS=l0,l2).
TIERS  ?= l0,l1
HEAVY  ?= skip
REPORT ?= build/ci-report

.PHONY: check test install clean

install: $(STAMP)

$(STAMP): pyproject.toml scripts/apt-packages.txt
	@bash scripts/install_apt.sh
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# bench: torchft 0.2.0, the peer of bench/elastic_ddp.py (the tests do not need it).
	# --no-compile: pip would byte-compile every installed module (~6,000 .py files here,
	# torch ~2,500); Python compiles the ones a run imports when it imports them, cached
	# unless PYTHONDONTWRITEBYTECODE is set (torch's wheel alone: 107 s -> 77 s to install
	# here; `import torch, xvendor` 3.6-4.3 s without pip's .pyc, 3.7-4.7 s with them).
	$(PY) -m pip install --quiet --no-compile -e '.[all,dev,bench]'
	@touch $(STAMP)

check: $(STAMP)
	$(VENV)/bin/xvendor check

# Through `xvendor ci run`: pytest's own output, then JUnit XML and the matrix report
# (Markdown, HTML) in build/ci-report. Fails on any failed test, and when no test ran.
test: $(STAMP)
	$(VENV)/bin/xvendor ci run --tier $(TIERS) --report $(REPORT) -- --xv-heavy $(HEAVY) $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
