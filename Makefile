# Two commands: `make book` builds the whole book (install included), `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PROFILE ?= quick
SMOKE_DIR ?= _build/smoke

.PHONY: install test unit notebooks book site clean

$(BIN)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

install: $(BIN)/.installed

# Unit tests, then every chapter executed on the smoke profile (nbval), in throwaway caches.
test: install unit notebooks

unit: install
	$(BIN)/python -m pytest tests

notebooks: install
	rm -rf $(SMOKE_DIR)
	cd book && ROTE_PROFILE=smoke ROTE_RUNS=../$(SMOKE_DIR)/runs ROTE_RESULTS=../$(SMOKE_DIR)/results \
		ROTE_FIGURES=../$(SMOKE_DIR)/figures ROTE_PLAIN_PROGRESS=1 \
		../$(BIN)/python -m pytest --nbval-lax -p no:cacheprovider -q .

# Execute every chapter with papermill and render the site into _build/html.
book: install
	$(BIN)/python -m rote book --profile $(PROFILE)

clean:
	rm -rf _build
