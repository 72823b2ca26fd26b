# brokerbench — `make demo` sets everything up and runs the main job; `make test` runs the
# whole test suite (what CI runs). Both start from a fresh Debian-like machine.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
BB := $(BIN)/brokerbench
RESULTS ?= results
# Messages in the synthetic run the analysis benchmark times (the issue's target size).
BENCH_MESSAGES ?= 100000000
# Debian packages the tools (not the brokers) need: user-data validation, report rendering,
# network namespaces for isolated nodes, fusermount3 for the lazy filesystem.
TOOL_PACKAGES ?= cloud-init chromium iproute2 fuse3

.PHONY: help demo setup setup-core test test-fast lint typecheck bench bench-peers bench-floor bench-soak durability clean

help:
	@echo "make demo       set up (virtualenv, packages) and run a small PostgreSQL + Redis sweep with report"
	@echo "make test       set up everything and run the whole test suite (what CI runs; TEST_WORKERS=2)"
	@echo "make test-fast  only the tests that start no server and no Spark"
	@echo "make lint       ruff + mypy"
	@echo "make bench      recording, runner, telemetry sampler, lazy filesystem and analysis benchmarks (prints figures)"
	@echo "make bench-peers brokerbench vs each broker's own load tool on one broker (PEERS_ARGS='--quick')"
	@echo "make bench-floor each client library alone vs brokerbench's adapter, CPU per message (FLOOR_ARGS='--systems nats')"
	@echo "make bench-soak  a 10-minute soak on a local Redis: client memory growth per hour (SOAK_ARGS='--minutes 60')"
	@echo "make durability  every power-loss scenario 3 times; writes docs/durability.md's table (DURABILITY_ARGS='--repeats 1')"

$(BIN)/python:
	@echo "==> creating the virtualenv $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The client libraries at the versions of infra/clients.lock: those the tests ran and AWS
# client machines install (python -m infra.constraints > infra/clients.lock writes it anew).
LOCK := -c infra/clients.lock

$(VENV)/.core: pyproject.toml infra/clients.lock | $(BIN)/python
	@echo "==> installing brokerbench and its core dependencies (PySpark, pyarrow, clients)"
	$(BIN)/pip install -q -e '.[analysis]' $(LOCK)
	@touch $@

$(VENV)/.full: pyproject.toml infra/clients.lock | $(BIN)/python
	@echo "==> installing brokerbench with every broker client, Pulumi and the test tools"
	$(BIN)/pip install -q -e '.[analysis,brokers,aws,dev]' $(LOCK)
	@touch $(VENV)/.core $@

java-check:
	@command -v java >/dev/null || { echo "==> installing Java 17"; apt-get install -y -qq openjdk-17-jre-headless; }
	@java -version 2>&1 | head -1

setup-core: $(VENV)/.core java-check
	@echo "==> installing PostgreSQL and Redis for the local brokers"
	$(BB) setup postgresql redis

setup: $(VENV)/.full java-check
	@echo "==> installing tool packages: $(TOOL_PACKAGES)"
	@missing=""; for p in $(TOOL_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi
	@echo "==> installing every local broker (Debian packages, jars from Maven Central, Go modules)"
	$(BB) setup

demo: setup-core
	@echo "==> running the demo sweep on PostgreSQL"
	$(BB) run workload/scenarios/postgresql-demo.toml --results $(RESULTS)
	@echo "==> running the demo sweep on Redis Streams"
	$(BB) run workload/scenarios/redis-demo.toml --results $(RESULTS)

# The suite's worker processes: the tests that start servers are in two groups, each run in
# one worker, one test after the other; the rest wherever a worker is free
# (tests/conftest.py, SERVER_GROUP_OF).
# TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= 2

test: setup
	$(BIN)/ruff check .
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup

test-fast: $(VENV)/.full
	$(BIN)/pytest -m "not slow"

lint: $(VENV)/.full
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(VENV)/.full
	$(BIN)/python tests/benchmarks/bench_recording.py
	$(BIN)/python tests/benchmarks/bench_telemetry.py
	$(BIN)/python tests/benchmarks/bench_lazyfs.py
	$(BIN)/python tests/benchmarks/bench_analysis.py --messages $(BENCH_MESSAGES)

bench-peers: $(VENV)/.full
	$(BIN)/python tests/benchmarks/bench_peers.py $(PEERS_ARGS)

bench-floor: $(VENV)/.full
	$(BIN)/python tests/benchmarks/bench_library_floor.py $(FLOOR_ARGS)

bench-soak: $(VENV)/.full
	$(BIN)/python tests/benchmarks/bench_soak.py $(SOAK_ARGS)

# The power-loss table of docs/durability.md: every power-loss scenario, 3 runs each (about
# an hour for the ten scenarios on a 2-core machine), merged into docs/durability-results.json.
durability: $(VENV)/.full
	$(BIN)/python tests/benchmarks/bench_durability.py --write-results $(DURABILITY_ARGS)

clean:
	rm -rf $(RESULTS) .pytest_cache .mypy_cache .ruff_cache
