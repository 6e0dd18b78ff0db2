# Self-bootstrapping targets: each creates .venv and installs what it needs on first use.
#   make demo             the daemon on the built-in simulated fabric (+ local Prometheus/Alertmanager if installed)
#   make test             the whole suite: unit, integration, e2e (what .ci/run runs; installs Debian test dependencies as root)
#   make unit             tests/ (not integration/, e2e/): pure Python in process, no socket served, no process started
#   make integration      tests/integration: in-process daemons, loopback HTTP and gRPC targets, the CLI as a
#                         subprocess; no system package needed
#   make e2e              tests/e2e: real Prometheus, Alertmanager, promtool, amtool, node_exporter, Chromium,
#                         docker-compose, systemd-analyze, and the whole daemon against every simulator
#   make generate         run every generator (GENERATORS below) and rewrite the generated files
#   make check-generated  fail when a committed generated file differs from what its generator writes
#   make lint             ruff, and mypy once pyproject.toml has a [tool.mypy] section
#   make docs             regenerate docs/metrics.md and docs/configuration.md only
#   make bench            side-by-side benchmarks against their peers
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYTEST := $(PY) -m pytest -q -p no:cacheprovider

# The suite starts hundreds of Python processes (xdist workers, daemons, CLIs): with bytecode
# writing turned off in the environment, every one of them compiles the package again.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test unit integration e2e generate check-generated bench lint docs system-deps clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

# `make demo` needs only the package itself (scripts/demo_stack.py uses its dependencies): not the
# test extras (pytest, hypothesis, ruff, mypy, kubernetes-validate ...).
DEMO_STAMP := $(VENV)/.demo-installed-stamp
$(DEMO_STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e .
	@touch $(DEMO_STAMP)

system-deps:
	@scripts/system-deps.sh

demo: $(DEMO_STAMP)
	@scripts/demo.sh

# The unit tier (tests/) runs on every core (pytest-xdist: -n auto): pure Python, nothing served or
# spawned, so it is CPU-bound and as fast as the cores. Worksteal: a worker that runs out takes
# tests queued for the other (under `load`, one core idled through the last quarter of the run).
# The integration tier (tests/integration/) serves and spawns on loopback and mostly waits on it
# (measured: 69 core-s in 72 s on two workers), so it runs on three workers a core
# (INTEGRATION_WORKERS), a file to a worker (loadfile: a module's daemon serves its tests).
#
# The e2e tier runs in two lanes side by side: its stacks of real Prometheus, Alertmanager,
# VictoriaMetrics and daemons mostly wait on real scrape and evaluation intervals, so one lane's
# waits are the other's CPU. The walk lane runs the scenario walk's two halves (the tests marked
# `walk`, six minutes each, a demo stack each, collecting every 2 s as `make demo` does: 0.3 core
# each) side by side; the other lane runs every other e2e file on two workers, a file to a worker
# (loadfile: a module-scoped stack serves all its tests, the real Slurm daemons take their tests in
# turn), then the tests marked `heavy` by themselves (the scale stack, tens of processes; measured
# beside two workers and the walk: both cores busy for six minutes, promtool 4x slower, and the
# scale stack's fabric matched with 553 and 2,336 series where it streams over 4,000). The walk
# lane's output is printed when both are done, after the other's. pytest exits 5 when
# PYTEST_ARGS (-k ...) leave a part nothing to run: not a failure. A failing part still lets
# the others run and report; any failure fails the target. (Not loadgroup: under pytest 9.2 it
# silently stops grouping, pytest-dev/pytest-xdist#1386.)
INTEGRATION_WORKERS ?= 6
# Each tier ends with its slowest tests, so where the suite's time goes is in every log (TIMINGS= turns it off).
TIMINGS ?= --durations=15
UNIT = $(PYTEST) -n auto --dist worksteal tests --ignore=tests/e2e --ignore=tests/integration $(TIMINGS) $(PYTEST_ARGS)
INTEGRATION = $(PYTEST) -n $(INTEGRATION_WORKERS) --dist loadfile tests/integration $(TIMINGS) $(PYTEST_ARGS)
OK = ok() { [ $$1 -eq 0 ] || [ $$1 -eq 5 ]; }
E2E = rc=0; $(OK); walk_log=$$(mktemp); trap 'kill $$walk 2>/dev/null; rm -f $$walk_log' EXIT; \
	( $(PYTEST) -n 2 --dist loadfile -m walk tests/e2e $(TIMINGS) $(PYTEST_ARGS) ) >$$walk_log 2>&1 & walk=$$!; \
	$(PYTEST) -n 2 --dist loadfile -m "not walk and not heavy" tests/e2e $(TIMINGS) $(PYTEST_ARGS); ok $$? || rc=1; \
	$(PYTEST) -m heavy tests/e2e $(TIMINGS) $(PYTEST_ARGS); ok $$? || rc=1; \
	wait $$walk; w=$$?; echo "== the walk lane (tests marked walk)"; cat $$walk_log; ok $$w || rc=1

test: $(STAMP) system-deps
	@export HYPOTHESIS_PROFILE=ci; $(OK); fail=0; \
	$(UNIT); ok $$? || fail=1; $(INTEGRATION); ok $$? || fail=1; \
	$(E2E); [ $$fail -eq 0 ] && exit $$rc; exit 1

unit: $(STAMP)
	$(UNIT)

integration: $(STAMP)
	$(INTEGRATION)

e2e: $(STAMP) system-deps
	@$(E2E); exit $$rc

# Every generator, in the order they run. Each rewrites its files when run plainly and exits 1,
# naming what is stale, with --check. A generator that writes alerts/*.rules.yaml goes before
# alerts/generate_prometheusrule.py, which copies those files into deploy/kubernetes/.
GENERATORS := \
	scripts/generate_docs.py \
	dashboards/generate.py \
	alerts/generate_xid_rules.py \
	alerts/generate_link_rules.py \
	alerts/generate_runbook_urls.py \
	alerts/generate_affected_annotations.py \
	alerts/generate_prometheusrule.py

generate: $(STAMP)
	@for g in $(GENERATORS); do echo "== $$g"; $(PY) $$g || exit 1; done

check-generated: $(STAMP)
	@stale=; for g in $(GENERATORS); do $(PY) $$g --check || stale="$$stale $$g"; done; \
	if [ -n "$$stale" ]; then echo "generated files out of date, from:$$stale (run: make generate)" >&2; exit 1; fi; \
	echo "generated files are current: $(GENERATORS)"

# The side-by-side benchmarks (bench/nvml_real_gpu.py needs a real GPU and is run by hand).
BENCHES := node_scrape serving_scrape nvml_poll gnmi_ingest load_soak probe_cost render scrape_load workload_refresh

BENCH_STAMP := $(VENV)/.bench-installed-stamp
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test,bench]'
	@touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) system-deps
	@for b in $(BENCHES); do echo "== bench/$$b.py"; $(PY) bench/$$b.py || exit 1; done

lint: $(STAMP)
	$(PY) -m ruff check exporter tests bench scripts dashboards alerts fuzz
	@if grep -q '^\[tool\.mypy\]' pyproject.toml; then echo "$(PY) -m mypy"; $(PY) -m mypy; \
	else echo "mypy: no [tool.mypy] in pyproject.toml, skipped"; fi

docs: $(STAMP)
	$(PY) -m infrapulse docs --write

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
