# research-dispatch — the two commands a newcomer needs: `make demo` and `make test`.
# Both bootstrap .venv themselves on a fresh clone.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install test lint demo bench reliability-doc clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n 2 --dist loadfile

demo: $(STAMP)
	$(BIN)/research-dispatch demo

bench: $(STAMP)
	$(BIN)/python scripts/bench.py

# docs/RELIABILITY.md: run the fault and hostile cases, write the table (tests/reliability/test_doc.py
# fails when the file no longer lists exactly the current cases).
reliability-doc: $(STAMP)
	$(BIN)/python scripts/reliability_report.py

clean:
	rm -rf build .pytest_cache .ruff_cache
