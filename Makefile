# Two commands matter: `make demo` and `make test`. Both install what they need, idempotently.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEB_PACKAGES := activemq libjettison-java libxstream-java
STAMP_DEB := .brokersync/.deb-installed
STAMP_VENV := $(VENV)/.installed
# SAM CLI lives in a virtualenv of its own: it pins boto3 and friends differently from moto.
SAM_CLI_VERSION := 1.170.0
SAM_VENV := .brokersync/sam-cli
STAMP_SAM := $(SAM_VENV)/.installed-$(SAM_CLI_VERSION)
STAMP_NPM := node_modules/.installed
# The template checks run as CI does: a region, and no credentials or profile to fall back on.
NO_AWS := env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE \
	AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null SAM_CLI_TELEMETRY=0
SAM_BUILD_DIR := .brokersync/sam-build

.PHONY: demo test lint format deps clean down template-check

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
	$(BIN)/pip install -q -e '.[dev,spark]'
	@touch $@

$(STAMP_SAM):
	@test -x $(SAM_VENV)/bin/python || $(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install -q --upgrade pip
	$(SAM_VENV)/bin/pip install -q aws-sam-cli==$(SAM_CLI_VERSION)
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
	@echo "sam build (log: .brokersync/sam-build.log)"
	@$(NO_AWS) $(SAM_VENV)/bin/sam build --template template.yaml --build-dir $(SAM_BUILD_DIR) \
	  --cached --cache-dir .brokersync/sam-cache > .brokersync/sam-build.log 2>&1 \
	  || { tail -40 .brokersync/sam-build.log; exit 1; }
	$(BIN)/python -m brokersync_ci.build_architecture $(SAM_BUILD_DIR)

lint: deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: deps
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: deps lint template-check
	$(BIN)/pytest $(PYTEST_ARGS)

# make demo MODE=failover RATE=1000 DURATION=60 (HEADLESS=1 for plain lines on a terminal too)
MODE ?= switchover
RATE ?= 200
DURATION ?= 60
demo: deps
	$(BIN)/brokersync demo --mode $(MODE) --rate $(RATE) --duration $(DURATION) $(if $(HEADLESS),--headless) $(DEMO_ARGS)

down:
	-$(BIN)/brokersync local down

clean: down
	rm -rf $(VENV) .brokersync .pytest_cache .ruff_cache node_modules .aws-sam
