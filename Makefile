# gpu-pool-portal: `make demo` runs the portal with demo data, `make test` runs every test.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PORT   ?= 8000
DEMO_ENV := DEBUG=1 DATABASE_URL=sqlite:///portal-demo.sqlite3

.PHONY: install demo test test-fast services bench lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: install
	$(DEMO_ENV) $(BIN)/python manage.py migrate --noinput
	$(DEMO_ENV) $(BIN)/python manage.py load_demo
	$(DEMO_ENV) $(BIN)/python manage.py load_demo_billing
	@echo "Portal: http://127.0.0.1:$(PORT)  (users admin / alice / bob, password demo)"
	$(DEMO_ENV) $(BIN)/python manage.py runserver 127.0.0.1:$(PORT)

services:
	bash scripts/ensure_services.sh

test: install services
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

test-fast: install
	$(BIN)/python -m pytest -m "not integration and not browser"

bench: install services
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/sizing.py
	$(BIN)/python benchmarks/approvals.py
	$(BIN)/python benchmarks/billing.py
	$(BIN)/python benchmarks/dashboards.py
	$(BIN)/python benchmarks/reclamation.py
	$(BIN)/python benchmarks/sqlite_burst.py

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) portal-demo.sqlite3 staticfiles .pytest_cache
