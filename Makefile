# The two commands of the README's quick start, and a few helpers.
#   make demo   set up, create the table, seed 100,000 rows, run for a minute, show freshness
#   make test   set up, lint, build the docs site, run the test suite (starts its own MariaDB and Redis)
#   make docs   build the docs site (mkdocs.yml, docs/) into site/, failing on any warning
#   make test-compose   the image built and both compose files brought up on Podman (make test runs it last)

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_ROWS ?= 100000
DEMO_SECONDS ?= 60
DEMO_WORKERS ?= 2

.PHONY: demo test test-compose lint typecheck docs setup clean browser promtool podman

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

setup: $(BIN)/.installed

demo: $(BIN)/.installed
	$(BIN)/recheck init-db
	$(BIN)/recheck seed --rows $(DEMO_ROWS) --truncate
	$(BIN)/recheck run --workers $(DEMO_WORKERS) --duration $(DEMO_SECONDS)

# The Kubernetes manifests (deploy/kubernetes/) against the Kubernetes and KEDA schemas, offline
# but for KEDA's schema package, fetched from npm once (tests/support/kube.py).
lint: $(BIN)/.installed typecheck
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m tests.support.kube deploy/kubernetes

# mypy over the package as it is installed: recheck.shared is shared/, recheck.workers workers/,
# recheck.dispatcher dispatcher/ (pyproject's package-dir), rebuilt as symlinks in build/typecheck;
# its messages name the files of the checkout.
typecheck: $(BIN)/.installed
	@rm -rf build/typecheck && mkdir -p build/typecheck/recheck
	@for f in recheck/*.py recheck/commands recheck/django; do ln -s ../../../$$f build/typecheck/recheck/; done
	@for d in shared workers dispatcher; do ln -s ../../../$$d build/typecheck/recheck/$$d; done
	@cd build/typecheck && out=$$(../../$(BIN)/mypy --config-file ../../pyproject.toml -p recheck); code=$$?; \
	  echo "$$out" | sed -e 's|^recheck/shared/|shared/|' -e 's|^recheck/workers/|workers/|' \
	    -e 's|^recheck/dispatcher/|dispatcher/|'; exit $$code

# --strict: a broken link or anchor, or a page missing from the nav, fails the build (not with
# --quiet, which hides the warnings --strict counts).
docs: $(BIN)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# Four parts: most tests in 4 processes (each with its own MariaDB and Redis; they mostly wait),
# then the timing-sensitive ones (chaos, and those marked serial) two at a time (they mostly wait
# on time and servers, and keep their bounds with one other beside them, as beside a CPU hog),
# then the few marked alone one at a time (a rate compared with the same machine's a moment
# before, which a neighbour starting between the two skews, or a bound a slow VM keeps only
# without a neighbour), then what users deploy (test-compose). Not beside the serial part: its image builds cost the
# timing-sensitive tests their bounds on a VM half as fast (docs/development.md). `pytest` runs
# all one at a time. --durations: the slowest tests in every log, to keep the suite's time in view.
test: lint docs browser promtool podman
	$(BIN)/pytest -q -n 4 -m "not serial and not containers" --durations=10
	$(BIN)/pytest -q -n 2 -m "serial and not alone and not containers" --durations=15
	$(BIN)/pytest -q -m "alone and not containers" --durations=5
	$(COMPOSE_TESTS)

# The image from deploy/Dockerfile and both compose files, up for real on Podman (Debian's; no
# Docker engine needed), driven by the Compose v2 binary; base images built from Debian's
# packages the first time (no registry needed). -s: each phase prints its time.
COMPOSE_TESTS = $(BIN)/pytest -q -s -m containers tests/containers --durations=5
test-compose: $(BIN)/.installed podman
	$(COMPOSE_TESTS)

podman:
	@command -v podman >/dev/null && command -v runc >/dev/null && command -v debootstrap >/dev/null || \
	  { echo "installing Debian's podman, runc and debootstrap for the compose test"; \
	    (apt-get install -y -q podman runc debootstrap >/dev/null 2>&1 || \
	     { apt-get update -qq && apt-get install -y -q podman runc debootstrap; }) }

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
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info site
