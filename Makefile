# research-dispatch — the two commands a newcomer needs: `make demo` and `make test`.
# Both bootstrap .venv themselves on a fresh clone. `make interop` also builds .venv-interop
# (llama-cpp-python, compiled: ~10+ minutes the first time on a machine, then taken from
# ~/.cache/research-dispatch/interop) and fetches a 98 MB model.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Two install levels: `make demo` needs only the package and its runtime dependencies (DEMO_STAMP);
# `make test`, `make lint` and the rest also need the development tools (STAMP).
DEMO_STAMP := $(VENV)/.demo-stamp
STAMP      := $(VENV)/.installed-stamp
PIP        := $(BIN)/python -m pip install --disable-pip-version-check --progress-bar on

# The real independent server of `make interop`: llama-cpp-python's OpenAI-compatible server, compiled for
# any x86-64-v3 host (scripts/dev/interop_build.py says why): not -march=native, and no AVX-512, AVX-VNNI or
# AMX (a native build on a host advertising AMX segfaulted on its first completion). llama.cpp's own names
# (ggml/CMakeLists.txt); LLAVA_BUILD=OFF skips the multimodal library the tests never load. The wheel is
# cached per machine under a key of the version and these flags; .venv-interop is rebuilt when either changes.
INTEROP_VENV  := .venv-interop
INTEROP_MODEL := build/interop/SmolLM2-135M-Instruct.Q4_1.gguf
LLAMA_CPP_PYTHON ?= llama-cpp-python[server]==0.3.36
INTEROP_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
	-DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF \
	-DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
	-DGGML_CPU_ALL_VARIANTS=OFF -DGGML_BACKEND_DL=OFF -DLLAVA_BUILD=OFF

.PHONY: install test test-slow test-e2e test-all test-thorough lint demo bench reliability-doc clean interop interop-venv

$(BIN)/python:
	@echo "make: creating $(VENV) with $(PYTHON) (Python >= 3.10)"
	$(PYTHON) -m venv $(VENV)

$(DEMO_STAMP): pyproject.toml setup.py | $(BIN)/python
	@echo "make: installing research-dispatch and its runtime dependencies into $(VENV) (first run only)"
	$(PIP) -e .
	@touch $@

$(STAMP): pyproject.toml setup.py $(DEMO_STAMP)
	@echo "make: installing the development tools (pytest, ruff, mypy, zizmor, actionlint, MCP servers) into $(VENV)"
	$(PIP) -e '.[dev]'
	@touch $@

install: $(STAMP)

# ruff (complexity C901 included), mypy --strict, and the import direction as import-linter contracts ([tool.importlinter]).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache --no-logo

# The test tiers (docs/ARCHITECTURE.md, "Test tiers"): unmarked tests are the fast tier; `slow` marks a
# subprocess CLI run, a real server or a build; `e2e` the workflow-emulator runs and anything over 20 s.
PYTEST := $(BIN)/python -m pytest -n 2 --dist loadfile --ignore=tests/interop
FAST   := -m "not slow and not e2e"

# The contributor's loop (the README's test command): ruff, mypy --strict over the package (the [tool.mypy]
# table in pyproject.toml), then the fast tier — about a minute on two cores.
test: lint
	$(PYTEST) $(FAST)

test-slow: $(STAMP)
	$(PYTEST) -m "slow and not e2e"

test-e2e: $(STAMP)
	$(PYTEST) -m e2e

# Every tier (what .ci/run runs; the repository's CI runs the three tiers as parallel jobs): lint, then the
# whole suite in one session.
test-all: lint
	$(PYTEST)

# Every hypothesis property of every tier (pytest's `hypothesis` marker) at twenty times its examples, drawn
# at random (tests/profiles.py): the scheduled CI job, or by hand.
test-thorough: $(STAMP)
	HYPOTHESIS_PROFILE=thorough $(PYTEST) -m hypothesis

# Always asked, cheap when nothing changed: the script compares the venv's recorded build key.
interop-venv:
	$(PYTHON) scripts/dev/interop_build.py $(INTEROP_VENV) '$(LLAMA_CPP_PYTHON)' '$(INTEROP_CMAKE_ARGS)'

$(INTEROP_MODEL): scripts/dev/interop_model.py $(STAMP)
	$(BIN)/python scripts/dev/interop_model.py $@

# A leg and a synthesis with kind = "openai-compatible" against llama-cpp-python's server (tests/interop),
# bound to 127.0.0.1.
interop: $(STAMP) interop-venv $(INTEROP_MODEL)
	INTEROP_PYTHON=$(INTEROP_VENV)/bin/python INTEROP_MODEL=$(INTEROP_MODEL) \
		$(BIN)/python -m pytest -p no:cacheprovider tests/interop

demo: $(DEMO_STAMP)
	$(BIN)/research-dispatch demo

bench: $(STAMP)
	$(BIN)/python scripts/dev/bench.py

# docs/RELIABILITY.md: run the fault and hostile cases, write the table (tests/reliability/test_doc.py
# fails when the file no longer lists exactly the current cases).
reliability-doc: $(STAMP)
	$(BIN)/python scripts/dev/reliability_report.py

clean:
	rm -rf build .pytest_cache .ruff_cache
