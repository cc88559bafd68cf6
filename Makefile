# Entry points: `make test`, `make bench`. The first run creates .venv and installs the project.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint typecheck unit bench clean generate check-generated lint-proto serve demo tools

install: $(STAMP)

$(STAMP): pyproject.toml client/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ./client/python -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check server client/python tests bench
	$(BIN)/ruff format --check server client/python tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

# Debian's prometheus server, which a test runs to scrape a live `serve` (installed when absent).
tools:
	@command -v prometheus > /dev/null || { apt-get update && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus; }

unit: $(STAMP) tools
	$(BIN)/pytest

test: lint lint-proto check-generated typecheck unit

bench: $(STAMP)
	$(BIN)/python -m bench.conversation
	$(BIN)/python -m bench.service
	$(BIN)/python -m bench.model

clean:
	rm -rf $(VENV) node_modules build/generated .mypy_cache .pytest_cache .ruff_cache .hypothesis

# The contract: Python code generated from proto/ is committed under client/python.
PROTOS := $(wildcard proto/agentskit/chat/v1/*.proto)
GEN_DIR := client/python
PROTOC = $(BIN)/python -m grpc_tools.protoc -I proto \
	--plugin=protoc-gen-mypy=$(BIN)/protoc-gen-mypy \
	--plugin=protoc-gen-mypy_grpc=$(BIN)/protoc-gen-mypy_grpc \
	--python_out=$(1) --mypy_out=$(1) --grpc_python_out=$(1) --mypy_grpc_out=$(1) \
	$(PROTOS)

generate: $(STAMP)
	$(call PROTOC,$(GEN_DIR))

check-generated: $(STAMP)
	rm -rf build/generated && mkdir -p build/generated
	$(call PROTOC,build/generated) > /dev/null
	diff -r -x __init__.py -x py.typed -x __pycache__ build/generated/agentskit $(GEN_DIR)/agentskit \
	  || (echo "generated code is stale: run make generate" >&2; exit 1)

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

lint-proto: node_modules/.installed
	npx --no-install buf lint

# Serve the example definitions on SQLite in ./var with the offline adapter (Ctrl-C drains).
serve: $(STAMP)
	$(BIN)/agentskit-chat serve

# A scripted conversation through the Python client against a live server.
demo: $(STAMP)
	$(BIN)/agentskit-chat demo
