# Chronicle's named commands. `make help` lists them.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
# The tests need real PostgreSQL and Redis; these are the local defaults (override to taste).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/chronicle
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15

.DEFAULT_GOAL := help
.PHONY: help install demo web worker beat migrate test chaos bench lint format check-deploy clean

help: ## List the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "Chronicle needs Python 3.11 or newer; $(PYTHON) is $$($(PYTHON) --version)."; exit 1; }
	@test -x $(BIN)/python || { echo "Creating the virtualenv in $(VENV)..."; $(PYTHON) -m venv $(VENV); }
	@echo "Installing dependencies (first run takes a minute)..."
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP) ## Create the virtualenv and install everything

demo: $(STAMP) ## Run Chronicle locally (SQLite, eager Celery) with a demo run loaded
	@DEBUG=1 $(BIN)/python manage.py migrate --noinput -v 0
	@echo "Loading the demo run..."
	@DEBUG=1 $(BIN)/python manage.py load_demo --url http://$(HOST):$(PORT)/
	@echo "Serving on http://$(HOST):$(PORT)/ (Ctrl-C to stop)"
	@DEBUG=1 $(BIN)/python manage.py runserver $(HOST):$(PORT) --noreload

migrate: $(STAMP) ## Apply database migrations (DATABASE_URL, SQLite by default)
	$(BIN)/python manage.py migrate --noinput

web: $(STAMP) ## Serve with gunicorn (production settings: set SECRET_KEY, DATABASE_URL, REDIS_URL)
	$(BIN)/python manage.py collectstatic --noinput -v 0
	$(BIN)/gunicorn config.wsgi --bind $(HOST):$(PORT) --workers $${WEB_WORKERS:-4} --access-logfile -

worker: $(STAMP) ## Run a Celery worker (needs REDIS_URL and DATABASE_URL)
	$(BIN)/celery -A config worker --queues ingest,default --loglevel INFO

beat: $(STAMP) ## Run the Celery beat scheduler (the sweeper of pending batches)
	$(BIN)/celery -A config beat --loglevel INFO

test: $(STAMP) ## Run the tests on real PostgreSQL, Redis, Celery worker and Chromium
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(BIN)/python -m pytest $(PYTEST_ARGS)

chaos: $(STAMP) ## Fault run (100,000 points through worker/web kills, Redis wipe, PostgreSQL restart) and full fuzzing
	$(BIN)/python -m chaos --points $${CHAOS_POINTS:-100000}
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-50} \
		$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_fuzz.py
	@$(BIN)/python -m chaos.fuzz_summary

bench: $(STAMP) ## Ingest, chart and page speed against MLflow in the same run (writes bench/results/)
	$(BIN)/python -m bench $(BENCH_ARGS)

lint: $(STAMP) ## ruff (lint and format check) and a check for missing migrations
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	DEBUG=1 $(BIN)/python manage.py makemigrations --check --dry-run

format: $(STAMP) ## Format and auto-fix with ruff
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

check-deploy: $(STAMP) ## Django's deployment checklist against production settings
	SECRET_KEY=$${SECRET_KEY:-$$($(BIN)/python -c 'import secrets; print(secrets.token_urlsafe(50))')} \
		ALLOWED_HOSTS=$${ALLOWED_HOSTS:-chronicle.example} $(BIN)/python manage.py check --deploy --fail-level WARNING

clean: ## Remove the virtualenv and local data
	rm -rf $(VENV) var
