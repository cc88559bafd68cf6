# Entry points: `make test`, `make bench`. The first run creates .venv and installs the project.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
GO_TOOLS := build/bin/.go-tools

# CONTRACT_SKIP_TOOLCHAINS=go (or node, or "go,node") skips, loudly, what needs those
# toolchains: their tests, and the buf checks (node) or the Go/TypeScript generation check.
comma := ,
SKIPPED_TOOLCHAINS := $(subst $(comma), ,$(CONTRACT_SKIP_TOOLCHAINS))
NEEDS_NODE := $(if $(filter node,$(SKIPPED_TOOLCHAINS)),,node_modules/.installed)
NEEDS_GO := $(if $(filter go,$(SKIPPED_TOOLCHAINS)),,$(GO_TOOLS))
NEEDS_CHROMIUM := $(if $(filter node,$(SKIPPED_TOOLCHAINS)),,chromium)
SKIP := echo "skipped by CONTRACT_SKIP_TOOLCHAINS=$(CONTRACT_SKIP_TOOLCHAINS):"

.PHONY: install test lint typecheck unit bench bench-goals bench-peer-server clean generate check-generated lint-proto serve demo \
	breaking-proto contract-baseline contract-tools go-tools conversation-tests diagram tools deploy-tools \
	postgresql-server chromium nginx web web-build react react-build react-screenshot docs \
	dist tour chat postgres postgres-stop

install: $(STAMP)

# Plain progress lines, and pip's own lines for the main install (one or two per package).
$(STAMP): pyproject.toml client/python/pyproject.toml
	@echo "creating $(VENV) with $(PYTHON)"
	@$(PYTHON) -m venv $(VENV)
	@echo "upgrading pip in $(VENV)"
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@echo "installing the project and its dependencies into $(VENV) (about a minute)..."
	$(BIN)/python -m pip install --progress-bar off -e ./client/python -e '.[dev]'
	@touch $(STAMP)
	@echo "done: $(VENV) is ready"

lint: $(STAMP)
	$(BIN)/ruff check server client/python tests bench tools/docs
	$(BIN)/ruff format --check server client/python tests bench tools/docs

typecheck: $(STAMP)
	$(BIN)/mypy

# Debian's prometheus server, which a test runs to scrape a live `serve`, curl, which
# replays the README's Connect calls, and valgrind, whose callgrind counts the instructions
# of bench/instructions.py (each installed when absent).
tools:
	@missing=""; for tool in prometheus curl valgrind; do \
	  command -v $$tool > /dev/null || missing="$$missing $$tool"; done; \
	[ -z "$$missing" ] || { apt-get update && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; }

# The suite runs its test files on TEST_WORKERS processes at once (pytest-xdist), each file
# whole on one of them (--dist loadfile); `make unit TEST_WORKERS=0` runs it in this process,
# one test after another, as plain `.venv/bin/pytest` does.
TEST_WORKERS ?= 2

# Before it, the project's own modules are compiled to bytecode, as installing a wheel does:
# the editable install leaves them as source, and where PYTHONDONTWRITEBYTECODE is set each
# of the hundreds of processes the tests start would compile them again (half a second each).
unit: $(STAMP) contract-tools tools deploy-tools postgresql-server nginx $(NEEDS_CHROMIUM)
	$(BIN)/python -m compileall -q server client/python tests bench
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

test: lint lint-proto breaking-proto check-generated typecheck docs conversation-tests unit

# The documentation site (mkdocs.yml, docs/) into build/site, in strict mode: a broken link or
# anchor, or a page missing from the navigation, fails. The command line, environment,
# contract and client references are generated from the code while it builds
# (tools/docs). Open build/site/index.html, or serve it with `.venv/bin/mkdocs serve`.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

# The example definitions' conversation tests (examples/definitions/*.test.yaml), in-process.
conversation-tests: $(STAMP)
	$(BIN)/agentskit-chat test examples/definitions --junit build/conversation-tests.xml

# The LangGraph server's environment (see bench-peer-server below).
LANGGRAPH_ENV := build/langgraph-env
LANGGRAPH_STAMP := $(LANGGRAPH_ENV)/.installed

bench: $(STAMP) tools postgresql-server nginx $(LANGGRAPH_STAMP)
	$(BIN)/python -m bench.conversation
	$(BIN)/python -m bench.service
	$(BIN)/python -m bench.floor
	$(BIN)/python -m bench.instructions
	$(BIN)/python -m bench.telemetry
	$(BIN)/python -m bench.peer
	$(BIN)/python -m bench.model
	$(BIN)/python -m bench.tools
	$(BIN)/python -m bench.workers
	$(BIN)/python -m bench.stores
	$(BIN)/python -m bench.server_peer
	$(BIN)/python -m bench.snapshot
	$(BIN)/python -m bench.proxy_soak
	$(BIN)/python -m bench.watch
	$(BIN)/python -m bench.live_turns --rounds 3
	$(BIN)/python -m bench.agui
	$(BIN)/python -m bench.aisdk
	$(BIN)/python -m bench.openai_front
	$(BIN)/python -m bench.rollout

# The turn's speed and telemetry goals, three runs of their benchmarks, in one table
# (bench/goals.py; about five minutes a run).
bench-goals: $(STAMP) postgresql-server $(LANGGRAPH_STAMP)
	$(BIN)/python -m bench.goals --runs 3

# The service beside the LangGraph server (bench/server_peer.py): `langgraph dev` and its SDK
# in an environment of their own, build/langgraph-env, from bench/langgraph_server/
# requirements.txt (their pins clash with the project's); `make bench` runs it too.
$(LANGGRAPH_STAMP): bench/langgraph_server/requirements.txt
	@echo "creating $(LANGGRAPH_ENV) with $(PYTHON) for the LangGraph server"
	@$(PYTHON) -m venv $(LANGGRAPH_ENV)
	$(LANGGRAPH_ENV)/bin/python -m pip install --quiet -r bench/langgraph_server/requirements.txt
	@touch $@

bench-peer-server: $(STAMP) $(LANGGRAPH_STAMP)
	$(BIN)/python -m bench.server_peer $(ARGS)

# Debian's Chromium, which the browser tests (tests/web) drive headless through playwright-core
# (installed when absent; not needed when CONTRACT_SKIP_TOOLCHAINS names node).
chromium:
	@command -v chromium > /dev/null || { echo "installing Debian's chromium for the browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -qq -y \
	    --no-install-recommends -o DPkg::Lock::Timeout=300 chromium > /dev/null; }

# Debian's nginx, which tests/deploy/test_proxy.py and the proxy soak put in front of three
# replicas as a gRPC proxy (deploy/nginx; installed when absent).
nginx:
	@command -v nginx > /dev/null || { echo "installing Debian's nginx for the proxy test"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -qq -y \
	    --no-install-recommends -o DPkg::Lock::Timeout=300 nginx > /dev/null; }

# The tests and the stores benchmark start a throwaway PostgreSQL cluster on loopback
# (bench/_postgres.py): install the Debian server package when it is absent.
# AGENTSKIT_CHAT_SKIP_POSTGRES=1 skips the PostgreSQL tests instead.
postgresql-server:
	@if [ -n "$(filter-out 0,$(AGENTSKIT_CHAT_SKIP_POSTGRES))" ] \
	  || ls /usr/lib/postgresql/*/bin/initdb > /dev/null 2>&1; then :; else \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -q -y --no-install-recommends postgresql; fi

clean:
	rm -rf $(VENV) node_modules build dist examples/web/dist examples/react/dist .mypy_cache .pytest_cache \
	  .ruff_cache .hypothesis

# The contract: Python code generated from proto/ is committed under client/python.
PROTOS := $(wildcard proto/agentskit/chat/v1/*.proto)
GEN_DIR := client/python
PROTOC = $(BIN)/python -m grpc_tools.protoc -I proto \
	--plugin=protoc-gen-mypy=$(BIN)/protoc-gen-mypy \
	--plugin=protoc-gen-mypy_grpc=$(BIN)/protoc-gen-mypy_grpc \
	--plugin=protoc-gen-connectrpc=$(BIN)/protoc-gen-connectrpc \
	--python_out=$(1) --mypy_out=$(1) --grpc_python_out=$(1) --mypy_grpc_out=$(1) \
	--connectrpc_out=$(1) --connectrpc_opt=protobuf=google,io=async \
	$(PROTOS)

# Go and TypeScript code is generated by buf from buf.gen.yaml with the pinned plugins.
GO_GEN := client/go/agentskit
TS_GEN := client/typescript/src/gen

generate: $(STAMP) node_modules/.installed go-tools
	$(call PROTOC,$(GEN_DIR))
	rm -rf $(GO_GEN) $(TS_GEN)
	$(BUF) generate

check-generated: $(STAMP) $(NEEDS_NODE) $(NEEDS_GO)
	rm -rf build/generated && mkdir -p build/generated
	$(call PROTOC,build/generated) > /dev/null
	diff -r -x __init__.py -x py.typed -x __pycache__ build/generated/agentskit $(GEN_DIR)/agentskit \
	  || (echo "generated Python code is stale: run make generate" >&2; exit 1)
ifneq ($(filter go node,$(SKIPPED_TOOLCHAINS)),)
	@$(SKIP) the check of the generated Go and TypeScript code
else
	$(BUF) generate -o build/generated
	diff -r build/generated/$(GO_GEN) $(GO_GEN) && diff -r build/generated/$(TS_GEN) $(TS_GEN) \
	  || (echo "generated Go or TypeScript code is stale: run make generate" >&2; exit 1)
endif

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

BUF := npx --no-install buf

lint-proto: $(NEEDS_NODE)
	@$(if $(NEEDS_NODE),$(BUF) lint,$(SKIP) buf lint)

# The breaking-change gate: the contract must stay compatible (buf.yaml: FILE) with the
# baseline image committed in proto/. Moving the baseline is a reviewed change of its own.
BASELINE := proto/baseline.binpb

breaking-proto: $(NEEDS_NODE)
	@$(if $(NEEDS_NODE),$(BUF) breaking --against $(BASELINE),$(SKIP) buf breaking)

contract-baseline: node_modules/.installed
	$(BUF) build --exclude-source-info -o $(BASELINE)

# Go tools pinned in tools/go.mod and built into build/bin: protoc-gen-go and
# protoc-gen-go-grpc (buf.gen.yaml, tests/contract), grpc-health-probe and grpcurl (tests/tools).
$(GO_TOOLS): tools/go.mod tools/go.sum
	@command -v go > /dev/null || { echo "Go is needed to build the pinned Go tools (tools/go.mod)" >&2; exit 1; }
	@echo "building the pinned Go tools into build/bin (the first time takes a minute)"
	cd tools && GOBIN=$(CURDIR)/build/bin go install \
	  google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc \
	  github.com/grpc-ecosystem/grpc-health-probe github.com/fullstorydev/grpcurl/cmd/grpcurl
	touch $@

go-tools: $(GO_TOOLS)

contract-tools: $(NEEDS_NODE) $(NEEDS_GO)

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
	$(BIN)/agentskit-chat serve --http-listen 127.0.0.1:8080

# The reference web renderer (examples/web), bundled with its pinned esbuild into examples/web/dist.
web-build: node_modules/.installed
	npm run build --workspace examples/web

# The renderer on the example definitions: `serve` as in `make serve`, plus its HTTP listener
# on WEB_LISTEN serving both the renderer and the API, so the page needs no CORS (Ctrl-C drains).
# Its ports differ from `make serve`'s, so both can run at once (they share the state in ./var).
WEB_LISTEN ?= 127.0.0.1:8081
WEB_GRPC_LISTEN ?= 127.0.0.1:50052

web: $(STAMP) web-build
	@echo "web renderer: open http://$(WEB_LISTEN)/ once the server listens (Ctrl-C stops it)"
	$(BIN)/agentskit-chat serve --listen $(WEB_GRPC_LISTEN) --http-listen $(WEB_LISTEN) \
	  --web-root examples/web/dist

# The React renderer (examples/react: the AI SDK's useChat over the listener's /ai-sdk/ front),
# typechecked and bundled with its pinned tools into examples/react/dist.
react-build: node_modules/.installed
	npm run build --workspace examples/react

# The React renderer on the example definitions, like `make web` on ports of its own (so
# `make serve`, `make web` and `make react` can all run at once; they share ./var).
REACT_LISTEN ?= 127.0.0.1:8082
REACT_GRPC_LISTEN ?= 127.0.0.1:50053

react: $(STAMP) react-build
	@echo "React renderer: open http://$(REACT_LISTEN)/ once the server listens (Ctrl-C stops it)"
	$(BIN)/agentskit-chat serve --listen $(REACT_GRPC_LISTEN) --http-listen $(REACT_LISTEN) \
	  --web-root examples/react/dist

# docs/react-renderer.png and docs/react-tools.png: the React renderer's browser test
# (tests/web/test_react.py) takes them into build/artifacts on every run (the second as
# react-approved.png); this runs the test and copies them into the docs.
react-screenshot: $(STAMP) $(NEEDS_CHROMIUM) node_modules/.installed
	$(BIN)/pytest tests/web/test_react.py -q
	cp build/artifacts/react-renderer.png docs/react-renderer.png
	cp build/artifacts/react-approved.png docs/react-tools.png

# The README's rendered state diagram (needs Graphviz's dot: apt-get install graphviz).
diagram: $(STAMP)
	$(BIN)/agentskit-chat graph examples/definitions --definition orders --format dot \
	  | dot -Tpng -Gdpi=96 -o docs/orders-states.png

# A scripted conversation through the Python client: on the server `make serve` runs when its
# health check at 127.0.0.1:50051 (or AGENTSKIT_CHAT_TARGET) answers, else on one of its own.
demo: $(STAMP)
	$(BIN)/agentskit-chat demo

# The installable packages, in DIST_DIR (docs/install.md installs them; tests/packaging proves
# each outside the checkout): the server's and the Python client's wheel and sdist (built by
# PyPA's `build`, in isolated environments) and the TypeScript client's npm tarball (`npm pack`
# runs its `prepack`, which builds it). The Go client is used from the checkout (`replace`).
DIST_DIR ?= dist

dist: $(STAMP) $(NEEDS_NODE)
	rm -rf $(DIST_DIR) client/python/build build/lib && mkdir -p $(DIST_DIR)
	$(BIN)/python -m build --outdir $(DIST_DIR) client/python
	$(BIN)/python -m build --outdir $(DIST_DIR) .
	$(if $(NEEDS_NODE),npm pack --workspace client/typescript --loglevel=error \
	  --pack-destination $(abspath $(DIST_DIR)),@$(SKIP) the TypeScript tarball)
	@ls -l $(DIST_DIR)

# The tour: `serve` as in `make serve` (same ports, its own state in var/tour), but every
# example definition answers agentic turns with the project's fake model server
# (agentskit_chat.fakemodel, started here on TOUR_MODEL_LISTEN), which streams a fixed
# sentence in chunks: a streamed agentic answer without an account or a key. Plain
# `make serve` keeps the definitions' offline adapter, which says no model is configured.
TOUR_MODEL_LISTEN ?= 127.0.0.1:50060
TOUR_LISTEN ?= 127.0.0.1:50051
TOUR_HTTP_LISTEN ?= 127.0.0.1:8080
TOUR_MODEL := {adapter: openai, base_url: "http://$(TOUR_MODEL_LISTEN)/v1", model: fake-model}

tour: $(STAMP)
	@rm -rf build/tour && mkdir -p build/tour
	@for file in examples/definitions/*.yaml examples/mcp/*.yaml; do \
	  case "$$file" in *.test.yaml) continue;; esac; \
	  sed -e 's|^model: {adapter: offline}$$|model: $(TOUR_MODEL)|' \
	    -e 's|^    command: python3$$|    command: $(abspath $(BIN))/python|' \
	    "$$file" > "build/tour/$${file##*/}"; \
	done
	@echo "tour: the fake model streams on $(TOUR_MODEL_LISTEN); in another terminal: make chat"
	@$(BIN)/python -m agentskit_chat.fakemodel --listen $(TOUR_MODEL_LISTEN) --chunks 8 --delay 0.15 \
	  --call-tool lookup_order & \
	  model=$$!; trap 'kill $$model 2> /dev/null' EXIT INT TERM; \
	  $(BIN)/agentskit-chat serve --definitions build/tour --state-dir var/tour \
	    --listen $(TOUR_LISTEN) --http-listen $(TOUR_HTTP_LISTEN)

# The terminal renderer on the server at AGENTSKIT_CHAT_TARGET (else 127.0.0.1:50051, where
# `make serve` and `make tour` listen; when none answers there, on a private server of its
# own over examples/definitions): `make chat DEFINITION=coffee`, or without DEFINITION to
# pick one from the list the server offers. `.venv/bin/agentskit-chat chat` is the same.
DEFINITION ?=

chat: $(STAMP)
	@$(BIN)/agentskit-chat chat $(if $(DEFINITION),--definition $(DEFINITION))

# A throwaway PostgreSQL cluster for trying the PostgreSQL store (the README's commands, in
# one target): Debian's server package on 127.0.0.1:PG_PORT, its files, a random password and
# a digest key under PG_DIR, the schema migrated; it prints the `serve` line to run on it.
# initdb refuses root, so as root the cluster's own commands run as the `postgres` user.
# `make postgres-stop` stops the cluster and removes PG_DIR.
PG_DIR ?= build/postgres
PG_PORT ?= 55432
PG_BIN = $$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
AS_PG = $$([ "$$(id -u)" = 0 ] && echo runuser -u postgres --)
PG_STORE = postgresql://chat@127.0.0.1:$(PG_PORT)/chat
PG_FILES = --store $(PG_STORE) --store-password-file $(PG_DIR)/db-password

postgres: $(STAMP) postgresql-server
	@[ ! -e $(PG_DIR) ] || { echo "make postgres: $(PG_DIR) exists; make postgres-stop removes it" >&2; exit 1; }
	@set -e; mkdir -p $(dir $(abspath $(PG_DIR))); umask 077; mkdir $(PG_DIR); \
	  openssl rand -hex 16 > $(PG_DIR)/db-password; openssl rand -hex 32 > $(PG_DIR)/digest-key; \
	  [ "$$(id -u)" != 0 ] || chown postgres $(PG_DIR) $(PG_DIR)/db-password; \
	  $(AS_PG) $(PG_BIN)/initdb -D $(PG_DIR)/data -U chat --auth=scram-sha-256 \
	    --pwfile=$(PG_DIR)/db-password > $(PG_DIR)/initdb.log; \
	  $(AS_PG) $(PG_BIN)/pg_ctl -D $(PG_DIR)/data -l $(PG_DIR)/server.log -w start \
	    -o "-p $(PG_PORT) -k $(abspath $(PG_DIR)) -c listen_addresses=127.0.0.1" > /dev/null; \
	  PGPASSWORD="$$(cat $(PG_DIR)/db-password)" $(PG_BIN)/createdb -h 127.0.0.1 -p $(PG_PORT) -U chat chat; \
	  $(BIN)/agentskit-chat migrate $(PG_FILES)
	@echo "PostgreSQL listens on 127.0.0.1:$(PG_PORT) (files in $(PG_DIR)); serve on it with:"
	@echo "  $(BIN)/agentskit-chat serve $(PG_FILES) --digest-key-file $(PG_DIR)/digest-key"
	@echo "make postgres-stop stops it and removes $(PG_DIR)"

postgres-stop:
	@[ ! -e $(PG_DIR)/data ] || $(AS_PG) $(PG_BIN)/pg_ctl -D $(PG_DIR)/data -w stop > /dev/null
	rm -rf $(PG_DIR)
