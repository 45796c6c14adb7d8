# Two commands: `make book` builds the whole book (install included), `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PROFILE ?= quick
SEEDS ?= 1
WORKERS ?=
SMOKE_DIR ?= _build/smoke

.PHONY: install test unit notebooks book train site browser clean clean-runs

$(BIN)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

install: $(BIN)/.installed

# Unit tests, then every chapter executed on the smoke profile (nbval), in throwaway caches, then
# the smoke site in a browser.
test: install unit notebooks browser

unit: install
	$(BIN)/python -m pytest tests --ignore=tests/test_site.py

notebooks: install
	rm -rf $(SMOKE_DIR)
	cd book && ROTE_PROFILE=smoke ROTE_RUNS=../$(SMOKE_DIR)/runs ROTE_RESULTS=../$(SMOKE_DIR)/results \
		ROTE_FIGURES=../$(SMOKE_DIR)/figures ROTE_PLAIN_PROGRESS=1 \
		../$(BIN)/python -m pytest --nbval-lax -p no:cacheprovider -q .

# The smoke site opened in a browser (tests/test_site.py, Playwright driving the system chromium):
# renders a fresh site into $(SMOKE_DIR)/site from the smoke caches `notebooks` left (trained runs
# reused), serves it on 127.0.0.1 and checks every page; screenshots in _build/site-screenshots.
# Without Playwright or chromium it is skipped and says why (.ci/run installs chromium and requires it).
browser: install
	rm -rf $(SMOKE_DIR)/site
	ROTE_SMOKE_DIR=$(SMOKE_DIR) $(BIN)/python -m pytest tests/test_site.py -p no:cacheprovider -q -rs

# Train every missing run of the plan, WORKERS at a time (default: the cores), then execute every
# chapter with papermill (they only load runs) and render the site into _build/html.
# `make book SEEDS=3` uses seed triples 0, 1, 2 (protocol 7.1); `make book` keeps 1 seed.
book: install
	$(BIN)/python -m rote book --profile $(PROFILE) --seeds $(SEEDS) $(if $(WORKERS),--workers $(WORKERS))

# Train the plan's missing runs only (`python -m rote plan` lists them first).
train: install
	$(BIN)/python -m rote train --plan --profile $(PROFILE) --seeds $(SEEDS) $(if $(WORKERS),--workers $(WORKERS))

# Everything built except the trained runs (_build/runs: hours of training); `make clean-runs` removes those.
clean:
	if [ -d _build ]; then find _build -mindepth 1 -maxdepth 1 ! -name runs -exec rm -rf {} +; fi

clean-runs:
	rm -rf _build/runs
