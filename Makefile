# Two commands matter: `make demo` and `make test`. Both install what they need, idempotently.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEB_PACKAGES := activemq libjettison-java libxstream-java
STAMP_DEB := .brokersync/.deb-installed
# Every extra the documented commands use, the benchmarks' included: a fresh checkout runs them all.
EXTRAS := dev,spark,docs,bench
comma := ,
STAMP_VENV := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))
# SAM CLI lives in a virtualenv of its own: it pins boto3 and friends differently from moto.
SAM_CLI_VERSION := 1.170.0
SAM_VENV := .brokersync/sam-cli
STAMP_SAM := $(SAM_VENV)/.installed-$(SAM_CLI_VERSION)
STAMP_NPM := node_modules/.installed
# The template checks run as CI does: a region, and no credentials or profile to fall back on.
NO_AWS := env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE \
	AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null SAM_CLI_TELEMETRY=0
SAM_BUILD_DIR := .brokersync/sam-build
# The same template built for this machine's architecture: what the built-functions check imports
# and invokes under the runtime's Python (an arm64 build's native libraries cannot load here).
HOST_BUILD_DIR := .brokersync/sam-build-host
# checkov scans the template; it lives in a virtualenv of its own (its pins are not moto's).
CHECKOV_VERSION := 3.3.30
CHECKOV_VENV := .brokersync/checkov
STAMP_CHECKOV := $(CHECKOV_VENV)/.installed-$(CHECKOV_VERSION)
# The functions' runtime is python3.13: sam build needs that interpreter on PATH, and the check of
# the built functions runs them under it. pyenv's copy counts when it is not the global version.
# Found once, when first used (after deps has made the virtualenv): brokersync_ci.runtime_python.
PYTHON_RUNTIME = $(eval PYTHON_RUNTIME := $$(shell $(BIN)/python -m brokersync_ci.runtime_python))$(PYTHON_RUNTIME)
RUNTIME_PATH = $(if $(PYTHON_RUNTIME),$(dir $(PYTHON_RUNTIME)):,)$(PATH)

.PHONY: demo test lint format deps clean down template-check functions lock supply-chain docs performance-page

deps: $(STAMP_DEB) $(STAMP_VENV)

# Debian packages: only touch apt when one of them is missing.
$(STAMP_DEB):
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	@mkdir -p $(dir $@) && touch $@

# The virtualenv is rebuilt when pyproject.toml changes.
$(STAMP_VENV): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[$(EXTRAS)]'
	@touch $@

$(STAMP_SAM):
	@test -x $(SAM_VENV)/bin/python || $(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install -q --upgrade pip
	$(SAM_VENV)/bin/pip install -q aws-sam-cli==$(SAM_CLI_VERSION)
	@touch $@

$(STAMP_CHECKOV):
	@test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install -q --upgrade pip
	$(CHECKOV_VENV)/bin/pip install -q checkov==$(CHECKOV_VERSION)
	@touch $@

$(STAMP_NPM): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# What sam deploy would ship, proven without an AWS account: SAM's own validation (plain and
# with cfn-lint), cfn-lint on its own, every state machine through asl-validator after its
# DefinitionSubstitutions, and sam build without Docker, whose native libraries must be arm64.
template-check: deps $(STAMP_SAM) $(STAMP_NPM)
	$(NO_AWS) $(SAM_VENV)/bin/sam validate --template template.yaml
	$(NO_AWS) $(SAM_VENV)/bin/sam validate --lint --template template.yaml
	$(SAM_VENV)/bin/cfn-lint template.yaml
	@rm -rf .brokersync/asl
	$(BIN)/python -m brokersync_ci.asl_files .brokersync/asl >/dev/null
	node_modules/.bin/asl-validator $$(for f in .brokersync/asl/*.asl.json; do printf -- '--json-path %s ' $$f; done)
	@test -n "$(PYTHON_RUNTIME)" || { echo "python3.13 not found: sam build needs the functions' runtime (pyenv install 3.13)"; exit 1; }
	@echo "sam build (log: .brokersync/sam-build.log)"
	@PATH="$(RUNTIME_PATH)" $(NO_AWS) $(SAM_VENV)/bin/sam build --template template.yaml --build-dir $(SAM_BUILD_DIR) \
	  --cached --cache-dir .brokersync/sam-cache > .brokersync/sam-build.log 2>&1 \
	  || { tail -40 .brokersync/sam-build.log; exit 1; }
	$(BIN)/python -m brokersync_ci.build_architecture $(SAM_BUILD_DIR)
	@$(MAKE) --no-print-directory functions
	$(BIN)/python -m brokersync_ci.build_architecture --same-packages $(SAM_BUILD_DIR) $(HOST_BUILD_DIR)

# The same sam build for this machine's architecture: what the local world's Lambda stand-in runs
# (under python3.13, nothing else importable) and what the check of the built functions invokes.
# --cached rebuilds only what changed; the local endpoint refuses to start on a stale build.
functions: deps $(STAMP_SAM)
	@test -n "$(PYTHON_RUNTIME)" || { echo "python3.13 not found: sam build needs the functions' runtime (pyenv install 3.13)"; exit 1; }
	@echo "sam build for $$(uname -m), what the local world runs (log: .brokersync/sam-build-host.log)"
	@$(BIN)/python -m brokersync_ci.host_template template.yaml .brokersync/template.host.yaml
	@PATH="$(RUNTIME_PATH)" $(NO_AWS) $(SAM_VENV)/bin/sam build --template .brokersync/template.host.yaml \
	  --build-dir $(HOST_BUILD_DIR) --cached --cache-dir .brokersync/sam-cache-host > .brokersync/sam-build-host.log 2>&1 \
	  || { tail -40 .brokersync/sam-build-host.log; exit 1; }

# The supply chain: the layer lock matches pyproject.toml, has no known vulnerability, and the
# template passes checkov (each skip is written next to its resource with the reason).
supply-chain: deps $(STAMP_CHECKOV)
	$(BIN)/python -m brokersync_ci.layer_lock check
	$(BIN)/python -m brokersync_ci.audit layers/requirements.txt
	$(CHECKOV_VENV)/bin/checkov --quiet --compact --skip-download --framework cloudformation --file template.yaml

# Re-resolve the layer's lock for Lambda (Python 3.13, arm64) after changing pyproject.toml's dependencies.
lock: deps
	$(BIN)/python -m brokersync_ci.layer_lock write $(BIN)/uv

lint: deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: deps
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The documentation site into .brokersync/site; strict: a broken link or anchor fails the build.
docs: deps
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# docs/performance.md from bench/performance.md.j2 and the results the benchmarks wrote (bench/results).
performance-page: deps
	$(BIN)/python -m brokersync_ci.bench_results render

test: deps lint docs template-check supply-chain
	BROKERSYNC_PYTHON_RUNTIME="$(PYTHON_RUNTIME)" $(BIN)/pytest --durations=25 $(PYTEST_ARGS)

# make demo MODE=failover RATE=1000 DURATION=60 (HEADLESS=1 for plain lines on a terminal too)
MODE ?= switchover
RATE ?= 200
DURATION ?= 60
demo: deps functions
	$(BIN)/brokersync demo --mode $(MODE) --rate $(RATE) --duration $(DURATION) $(if $(HEADLESS),--headless) $(DEMO_ARGS)

down:
	-$(BIN)/brokersync local down

clean: down
	rm -rf $(VENV) .brokersync .pytest_cache .ruff_cache node_modules .aws-sam
