# The two commands of the README's quick start, and a few helpers.
#   make demo   set up, create the table, seed 100,000 rows, run for a minute, show freshness
#   make test   set up, lint, run the test suite (starts its own MariaDB and Redis)

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_ROWS ?= 100000
DEMO_SECONDS ?= 60
DEMO_WORKERS ?= 2

.PHONY: demo test lint setup clean browser promtool

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

setup: $(BIN)/.installed

demo: $(BIN)/.installed
	$(BIN)/recheck init-db
	$(BIN)/recheck seed --rows $(DEMO_ROWS) --truncate
	$(BIN)/recheck run --workers $(DEMO_WORKERS) --duration $(DEMO_SECONDS)

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint browser promtool
	$(BIN)/pytest -q

# The dashboard test drives Debian's Chromium (no browser download); install it if missing.
browser:
	@command -v chromium >/dev/null || { echo "installing Debian's chromium for the dashboard test"; \
	  (apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -q chromium; }) }

# The alert rules are checked and unit-tested with Prometheus's own promtool (Debian's
# prometheus package; its service is not started).
promtool:
	@command -v promtool >/dev/null || { echo "installing Debian's prometheus for promtool"; \
	  (apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1 || \
	   { apt-get update -qq && apt-get install -y -q --no-install-recommends prometheus; }) }

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
