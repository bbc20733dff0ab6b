# Batched QR contest: evaluator and entry.
#   make eval    test and benchmark submission.py on the default specs (table on screen, JSON in results/);
#                QUICK=1 for a first try (specs/quick.yml, short timed loops)
#   make test    the evaluator's own test suite (pytest, CPU is enough)
#   make setup   install only what does not import yet (on the H200 everything imports: nothing is installed)
#   make setup-test  also what the test suite needs: pytest, the leaderboard server's packages, Chromium

PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
SUBMISSION ?= submission.py
SPECS ?=
RESULTS ?= results
SPECS_OPT = $(if $(SPECS),--specs $(SPECS),)$(if $(QUICK), --quick,)

# Leaderboard upload settings (see README, "Leaderboard").
LEADERBOARD ?= qr
SERVER ?= http://127.0.0.1:8000
TOKEN ?=

.PHONY: setup setup-test test eval upload

setup:
	@$(PYTHON) -c 'import torch' 2>/dev/null || $(PIP) install torch==2.13.0
	@$(PYTHON) -c 'import triton' 2>/dev/null || $(PIP) install triton
	@$(PYTHON) -c 'import numpy' 2>/dev/null || $(PIP) install numpy
	@$(PYTHON) -c 'import click' 2>/dev/null || $(PIP) install click
	@$(PYTHON) -c 'import rich' 2>/dev/null || $(PIP) install rich
	@$(PYTHON) -c 'import yaml' 2>/dev/null || $(PIP) install pyyaml

# The leaderboard server's packages and a headless browser are needed by the tests (and `serve`), not by
# `make eval`: the GPU machine has neither and cannot install them.
setup-test: setup
	@$(PYTHON) -c 'import pytest' 2>/dev/null || $(PIP) install pytest
	@$(PYTHON) -c 'import fastapi, uvicorn, sqlalchemy, jinja2' 2>/dev/null || \
		$(PIP) install fastapi==0.165.0 uvicorn==0.55.0 sqlalchemy==2.1.9 jinja2==3.1.6
	@$(PYTHON) -c 'import psycopg' 2>/dev/null || $(PIP) install 'psycopg[binary]==3.3.9'
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		{ apt-get update -qq && apt-get install -y -qq postgresql >/dev/null; }
	@command -v chromium >/dev/null 2>&1 || \
		{ apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

test: setup-test
	$(PYTHON) -m pytest -q

eval: setup
	@mkdir -p $(RESULTS)
	$(PYTHON) -m eval test --submission $(SUBMISSION) $(SPECS_OPT) --json $(RESULTS)/test.json
	$(PYTHON) -m eval benchmark --submission $(SUBMISSION) $(SPECS_OPT) --json $(RESULTS)/benchmark.json

# A leaderboard-mode run of the exact file, then its upload; the token (TOKEN=… or
# $$LEADERBOARD_TOKEN) reaches the upload through the environment, never a command line.
upload: export LEADERBOARD_TOKEN := $(or $(TOKEN),$(LEADERBOARD_TOKEN))
upload: setup
	@mkdir -p $(RESULTS)
	$(PYTHON) -m eval leaderboard --submission $(SUBMISSION) $(SPECS_OPT) --json $(RESULTS)/leaderboard.json
	$(PYTHON) -m eval upload --submission $(SUBMISSION) \
		--report $(RESULTS)/leaderboard.json --leaderboard $(LEADERBOARD) --server $(SERVER)
