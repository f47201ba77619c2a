# Two commands matter: `make demo` and `make test`. Both install what they need, idempotently.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEB_PACKAGES := activemq libjettison-java libxstream-java
STAMP_DEB := .brokersync/.deb-installed
STAMP_VENV := $(VENV)/.installed

.PHONY: demo test lint format deps clean down

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
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

lint: deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: deps
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: deps lint
	$(BIN)/pytest $(PYTEST_ARGS)

demo: deps
	$(BIN)/brokersync demo $(DEMO_ARGS)

down:
	-$(BIN)/brokersync local down

clean: down
	rm -rf $(VENV) .brokersync .pytest_cache .ruff_cache
