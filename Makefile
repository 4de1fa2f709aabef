# Two entry points (README quick start): `make run` reproduces the seed cases; `make test` runs the tests.
# Both create .venv and install the project on first use; the real components are built on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test unit install clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

install: $(BIN)/.installed

run: $(BIN)/.installed
	$(BIN)/kueue-harness run $(ARGS)

test: $(BIN)/.installed
	$(BIN)/python -m pytest tests cases --recheck-bundles --junitxml=artifacts/junit-tests.xml $(PYTEST_ARGS)

unit: $(BIN)/.installed
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) artifacts
