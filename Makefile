# Entry points: `make test`, `make bench`. The first run creates .venv and installs the project.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint typecheck unit bench clean generate check-generated lint-proto serve demo \
	breaking-proto contract-baseline contract-tools conversation-tests diagram tools deploy-tools \
	postgresql-server

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

unit: $(STAMP) contract-tools tools deploy-tools postgresql-server
	$(BIN)/pytest

test: lint lint-proto breaking-proto check-generated typecheck conversation-tests unit

# The example definitions' conversation tests (examples/definitions/*.test.yaml), in-process.
conversation-tests: $(STAMP)
	$(BIN)/agentskit-chat test examples/definitions --junit build/conversation-tests.xml

bench: $(STAMP) postgresql-server
	$(BIN)/python -m bench.conversation
	$(BIN)/python -m bench.service
	$(BIN)/python -m bench.model
	$(BIN)/python -m bench.workers
	$(BIN)/python -m bench.stores

# The tests and the stores benchmark start a throwaway PostgreSQL cluster on loopback
# (tests/postgres.py): install the Debian server package when it is absent.
# AGENTSKIT_CHAT_SKIP_POSTGRES=1 skips the PostgreSQL tests instead.
postgresql-server:
	@if [ -n "$(filter-out 0,$(AGENTSKIT_CHAT_SKIP_POSTGRES))" ] \
	  || ls /usr/lib/postgresql/*/bin/initdb > /dev/null 2>&1; then :; else \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -q -y --no-install-recommends postgresql; fi

clean:
	rm -rf $(VENV) node_modules build .mypy_cache .pytest_cache .ruff_cache .hypothesis

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

BUF := npx --no-install buf

lint-proto: node_modules/.installed
	$(BUF) lint

# The breaking-change gate: the contract must stay compatible (buf.yaml: FILE) with the
# baseline image committed in proto/. Moving the baseline is a reviewed change of its own.
BASELINE := proto/baseline.binpb

breaking-proto: node_modules/.installed
	$(BUF) breaking --against $(BASELINE)

contract-baseline: node_modules/.installed
	$(BUF) build --exclude-source-info -o $(BASELINE)

# Code generators that tests/contract runs on the contract: protoc-gen-go (pinned in
# tests/contract/go/go.mod) and protoc-gen-es and tsc (pinned in package.json).
# CONTRACT_SKIP_TOOLCHAINS=go (or node, or "go node") skips those tests on machines without them.
PROTOC_GEN_GO := build/bin/protoc-gen-go
comma := ,
SKIPPED_TOOLCHAINS := $(subst $(comma), ,$(CONTRACT_SKIP_TOOLCHAINS))

$(PROTOC_GEN_GO): tests/contract/go/go.mod tests/contract/go/go.sum
	@command -v go > /dev/null || { echo "Go is needed to build protoc-gen-go;" \
	  "set CONTRACT_SKIP_TOOLCHAINS=go to skip the Go contract test" >&2; exit 1; }
	cd tests/contract/go && GOBIN=$(CURDIR)/build/bin go install google.golang.org/protobuf/cmd/protoc-gen-go
	touch $@

contract-tools: $(if $(filter node,$(SKIPPED_TOOLCHAINS)),,node_modules/.installed) \
	$(if $(filter go,$(SKIPPED_TOOLCHAINS)),,$(PROTOC_GEN_GO))

# kustomize and kubeconform (pinned in deploy/tools/go.mod): tests/deploy renders the
# Kubernetes base in deploy/k8s and validates it against schemas from a PyPI package.
DEPLOY_TOOLS := build/bin/.deploy-tools

$(DEPLOY_TOOLS): deploy/tools/go.mod deploy/tools/go.sum
	@command -v go > /dev/null || { echo "Go is needed to build kustomize and kubeconform" >&2; exit 1; }
	cd deploy/tools && GOBIN=$(CURDIR)/build/bin go install \
	  github.com/yannh/kubeconform/cmd/kubeconform sigs.k8s.io/kustomize/kustomize/v5
	touch $@

deploy-tools: $(DEPLOY_TOOLS)

# Serve the example definitions on SQLite in ./var with the offline adapter (Ctrl-C drains).
serve: $(STAMP)
	$(BIN)/agentskit-chat serve

# The README's rendered state diagram (needs Graphviz's dot: apt-get install graphviz).
diagram: $(STAMP)
	$(BIN)/agentskit-chat graph examples/definitions --definition orders --format dot \
	  | dot -Tpng -Gdpi=96 -o docs/orders-states.png

# A scripted conversation through the Python client against a live server.
demo: $(STAMP)
	$(BIN)/agentskit-chat demo
