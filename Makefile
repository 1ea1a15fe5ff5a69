# The two commands a newcomer needs: `make demo` and `make test`. Both set up what they need.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

# The servers the tests use. `make test` starts throwaway ones of its own and sets these
# (deploy/test-services.sh); set one yourself to use a server you run. The test-* and chaos
# targets alone use the machine's default ports.
TEST_POSTGRES ?= postgres://postgres@127.0.0.1:5432
TEST_REDIS ?= redis://127.0.0.1:6379
TEST_AMQP ?= amqp://guest:guest@127.0.0.1:5672//
TEST_RABBITMQ_NODE ?=
# PostgreSQL is where concurrency is proven; pytest-django creates test_<name> itself.
TEST_DATABASE_URL ?= $(TEST_POSTGRES)/reset_delivery
# Where the chaos runs find (and break) their database server and brokers.
CHAOS_SERVICES = CHAOS_POSTGRES=$(TEST_POSTGRES) CHAOS_REDIS=$(TEST_REDIS) CHAOS_AMQP=$(TEST_AMQP) \
	CHAOS_RABBITMQ_NODE=$(TEST_RABBITMQ_NODE)
BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/reset_delivery_bench
# Test-only secrets: never used outside the test and bench runs.
TEST_ENV := DJANGO_SECRET_KEY=test-only-secret-key-not-for-production \
	DJANGO_HTTPS=false \
	NOTIFY_VAULT_KEYS=UgWBMItqeg32DFaO66oGGC12eKPo0iNjtUu-sNebIlw= \
	NOTIFY_RECIPIENT_PEPPER=test-only-pepper \
	TWILIO_ACCOUNT_SID=AC00000000000000000000000000000000 \
	TWILIO_AUTH_TOKEN=test-only-twilio-token \
	METRICS_TOKEN=test-only-metrics-token-not-for-production \
	EMAIL_HOST=127.0.0.1 \
	PUBLIC_BASE_URL=http://127.0.0.1:8000

.PHONY: install native system-packages lint typecheck test test-suites test-postgres test-sqlite bench chaos chaos-short demo clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,simulator]'
	touch $(STAMP)

# axe-core for the browser tests' accessibility checks, pinned by package-lock.json.
NODE_STAMP := node_modules/.installed-stamp
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

install: $(STAMP) $(NODE_STAMP) native

# The decision code compiled with mypyc beside its source (config/native.py): a no-op while the
# compiled copies are current. Without them (or with NOTIFY_NATIVE=false) the sources run.
native: $(STAMP)
	$(BIN)/python -c 'from config import native; native.build()'

# Debian packages the tests use: Chromium, promtool, amtool, and the PostgreSQL, Redis and
# RabbitMQ servers the tests start throwaway instances of.
system-packages:
	deploy/system-packages.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy .

test-postgres: $(STAMP) $(NODE_STAMP) native
	$(TEST_ENV) DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_REDIS)/15 $(BIN)/pytest

# The embedded default must stay honest: the core runs on SQLite too (without the
# PostgreSQL-only concurrency proofs), in a scratch var/ so it never touches the demo's.
test-sqlite: $(STAMP) native
	rm -rf var/test-sqlite
	env -u DATABASE_URL NOTIFY_VAR_DIR=var/test-sqlite $(BIN)/pytest -q -m "not postgres" tests/notify tests/policies tests/runbook tests/plumbing

# The short chaos runs: a few hundred events under faults on Redis, fewer on RabbitMQ, a few
# minutes in all (CI runs them too).
chaos-short: $(STAMP) native
	$(TEST_ENV) $(CHAOS_SERVICES) $(BIN)/python -m bench.chaos --events 300 --rate 10 --workers 3
	$(TEST_ENV) $(CHAOS_SERVICES) $(BIN)/python -m bench.chaos --events 150 --rate 10 --workers 3 --broker rabbitmq

# Everything, on throwaway PostgreSQL, Redis and RabbitMQ servers of its own (started and
# removed by deploy/test-services.sh; a server given as TEST_POSTGRES, TEST_REDIS or TEST_AMQP
# is used instead).
test: system-packages lint typecheck native
	deploy/test-services.sh run $(MAKE) --no-print-directory test-suites

test-suites: test-postgres test-sqlite chaos-short

# The benchmark's own process publishes to the Redis database the API benchmark's server uses
# (bench/api.py, BROKER), so that a creation's parts are timed against the broker they name.
bench: $(STAMP) native
	$(TEST_ENV) DATABASE_URL=$(BENCH_DATABASE_URL) CELERY_BROKER_URL=$(TEST_REDIS)/14 $(BIN)/python -m bench.run $(BENCH)

# Events through real workers, beat, web and the simulator on PostgreSQL, with Redis and then
# RabbitMQ as the broker, while workers are killed, the broker restarts, connections drop,
# the relay crawls and two workers' clocks are 30 s off; then the invariants.
# CHAOS_ARGS, e.g. "--events 300 --rate 10", makes shorter runs. NB: restarts the local Redis
# and RabbitMQ.
chaos: $(STAMP) native
	$(TEST_ENV) $(CHAOS_SERVICES) $(BIN)/python -m bench.chaos $(CHAOS_ARGS)
	$(TEST_ENV) $(CHAOS_SERVICES) $(BIN)/python -m bench.chaos --events 1000 --broker rabbitmq $(CHAOS_ARGS)

# Everything on the embedded defaults (SQLite, filesystem broker): web, worker, beat,
# simulator and a feeder of demo events. Ctrl-C stops them all.
demo: $(STAMP)
	$(BIN)/python -c 'from config import native; native.build()' || echo "native: not compiled (no C compiler?); the demo runs the sources"
	PATH="$(abspath $(BIN)):$$PATH" deploy/demo.sh

clean:
	rm -rf var/test-sqlite .mypy_cache .ruff_cache .pytest_cache build
	find notify runbook -name '*.so' -delete
	rm -f ./*__mypyc.*
