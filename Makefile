# gpu-pool-portal: `make demo` runs the portal with demo data, `make test` runs every test.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PORT   ?= 8000
# The demo runs as users see the portal: DEBUG off (the portal's own 404/403/500 pages, static
# files from WhiteNoise), plain HTTP on loopback, a secret key made once for this checkout;
# PORTAL_DEMO keeps its log quiet (e-mails as one line each, no cache warning for its one process);
# DEMO_CLOCK_S: the demo_clock command stands in for Celery beat's allocation lifecycle.
DEMO_ENV := PORTAL_DEMO=1 DEMO_CLOCK_S=30 DEBUG=0 SECRET_KEY="$$(cat .demo-secret-key)" DATABASE_URL=sqlite:///portal-demo.sqlite3 \
	SECURE_SSL_REDIRECT=0 SESSION_COOKIE_SECURE=0 CSRF_COOKIE_SECURE=0 SECURE_HSTS_SECONDS=0
# The Slurm integration tier runs on 24.11 (discovering v0.0.42) with the whole suite, then
# again on 24.11 pinned to v0.0.41, on 26.05 (discovering v0.0.45) and on the machine's 22.05
# (v0.0.38); see tests/integration/slurm/slurm_cluster.py for the env files.
SLURM_MODERN_ENV := /opt/portal-slurm-modern/var/lib/slurm-test/slurm-test.env
SLURM_V41_ENV    := /opt/portal-slurm-modern/var/lib/slurm-test/slurm-test-v0.0.41.env
SLURM_2605_ENV   := /opt/portal-slurm-forky/var/lib/slurm-test/slurm-test.env
SLURM_2205_ENV   := /var/lib/slurm-test/slurm-test.env
SLURM_TIER       := tests/integration/slurm tests/scheduler_adapters/contract
# Pinned to v0.0.41 the REST parser differs but slurmctld is the same 24.11 the whole suite ran
# on: its own clock (a daily reservation moved forward, ~1 min of waiting) is not timed twice.
SAME_SLURMCTLD   := --deselect tests/integration/slurm/test_recurring_reservations.py::test_slurmctld_moves_a_daily_reservation_forward_by_one_day
# The fast tier in two processes (pytest-xdist, one test database each); FAST_WORKERS= runs it in one.
FAST_WORKERS     ?= -n 2

.PHONY: install demo test test-slurm test-fast test-conformance services bench bench-sizing-all lint clean

# pip twice quiet: errors only (a pip.conf naming absent index directories warns once per package).
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --quiet --upgrade pip
	$(BIN)/pip install --quiet --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: install
	@test -s .demo-secret-key || $(BIN)/python -c "import secrets; print(secrets.token_urlsafe(50))" > .demo-secret-key
	$(DEMO_ENV) $(BIN)/python manage.py collectstatic --noinput --verbosity 0
	$(DEMO_ENV) $(BIN)/python manage.py migrate --noinput
	$(DEMO_ENV) $(BIN)/python manage.py load_demo
	$(DEMO_ENV) $(BIN)/python manage.py load_demo_billing
	@echo "Portal: http://127.0.0.1:$(PORT)  (users admin / alice / bob, password demo)"
	@# no Celery beat in the demo: demo_clock opens and closes allocation windows every 30 s
	$(DEMO_ENV) $(BIN)/python manage.py demo_clock & clock=$$!; trap 'kill $$clock' EXIT INT TERM; \
	$(DEMO_ENV) $(BIN)/python manage.py runserver 127.0.0.1:$(PORT)

services:
	bash scripts/ensure_services.sh

# Checks anyone can run alone: ruff check, ruff format --check, lint-imports, makemigrations --check.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	DEBUG=1 DATABASE_URL=sqlite:///:memory: $(BIN)/python manage.py makemigrations --check --dry-run

# Fast tier first (no services but PostgreSQL), then everything that needs a real service.
test: install services lint
	SLURM_TEST_ENV=$(SLURM_MODERN_ENV) $(BIN)/python -m pytest -m "not integration and not browser and not conformance and not subprocess" $(FAST_WORKERS)
	$(BIN)/python -m pytest -m subprocess
	SLURM_TEST_ENV=$(SLURM_MODERN_ENV) $(BIN)/python -m pytest -m "integration or browser"
	$(BIN)/python -m pytest -m conformance -s
	SLURM_TEST_ENV=$(SLURM_V41_ENV) $(BIN)/python -m pytest -m integration $(SLURM_TIER) $(SAME_SLURMCTLD)
	SLURM_TEST_ENV=$(SLURM_2605_ENV) $(BIN)/python -m pytest -m integration $(SLURM_TIER)
	SLURM_TEST_ENV=$(SLURM_2205_ENV) $(BIN)/python -m pytest -m integration $(SLURM_TIER)

# The Slurm tier alone against any cluster an env file describes: make test-slurm SLURM_TEST_ENV=f
test-slurm: install
	SLURM_TEST_ENV=$(SLURM_TEST_ENV) $(BIN)/python -m pytest -m integration $(SLURM_TIER)

test-fast: install
	$(BIN)/python -m pytest -m "not integration and not browser and not conformance and not subprocess" $(FAST_WORKERS)

# schemathesis --checks all against gunicorn, as a pool admin and as a member (minutes; prints counts)
test-conformance: install
	$(BIN)/python -m pytest -m conformance -s

bench: install services
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/sizing.py
	$(BIN)/python benchmarks/estimate.py
	$(BIN)/python benchmarks/sizing_page.py
	$(BIN)/python benchmarks/approvals.py
	$(BIN)/python benchmarks/billing.py
	$(BIN)/python benchmarks/budgets.py
	$(BIN)/python benchmarks/recurring.py
	$(BIN)/python benchmarks/dashboards.py
	$(BIN)/python benchmarks/reclamation.py
	BENCH_NODES=12600 $(BIN)/python benchmarks/reclamation.py  # 100,800 GPUs (issue 29)
	$(BIN)/python benchmarks/device_summaries.py
	$(BIN)/python benchmarks/sqlite_burst.py
	$(BIN)/python benchmarks/fleet.py
	$(BIN)/python benchmarks/placement.py
	$(BIN)/python benchmarks/placement_db.py
	$(BIN)/python benchmarks/elastic.py
	$(BIN)/python benchmarks/burst_pools.py
	$(BIN)/python benchmarks/serving.py
	$(BIN)/python benchmarks/waiting.py
	$(BIN)/python benchmarks/explain.py
	$(BIN)/python benchmarks/advisor.py
	$(BIN)/python benchmarks/tokenflow.py

# Issue 34's accuracy check over all five bundled measurement sets (723 rows, leave one source
# out; a few minutes): the table per regime and the targets; exits 1 while one is unmet.
bench-sizing-all: install
	$(BIN)/python benchmarks/sizing.py --quiet $(foreach set,$(SIZING_SETS),--dataset tests/fixtures/$(set))

SIZING_SETS = sizing_dataset.json sizing_dataset_2026.json sizing_dataset_2026_moe.json \
	sizing_dataset_2026_trtllm_next.json sizing_dataset_2026_threads.json

clean:
	rm -rf $(VENV) portal-demo.sqlite3 staticfiles .pytest_cache
