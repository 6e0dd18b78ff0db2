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
# The integration tier (tests/integration/) serves and spawns on loopback, then runs on its own
# (its bounds are sized for a machine it has to itself).
#
# The e2e tier runs on two workers: its stacks of real Prometheus, Alertmanager, vmalert and
# daemons mostly wait on real scrape and evaluation intervals, and two at a time leave them the CPU
# those intervals need on a 2-core machine. A file goes to one worker whole (loadfile: a
# module-scoped stack serves all its tests, the real Slurm daemons take their tests in turn), in
# collection order, where tests marked `starts_first` (the scenario walk's two halves,
# test_alerting_walk_*.py, six minutes each) lead: they start at once, side by side. Tests marked
# `alone` run afterwards by themselves: the healthy demo's compressed hour fails on a single
# pending alert, and a scrape made late by a neighbour's stack is one. (Measured: running the
# integration tier or the other e2e files beside the walk, even under nice, starves them past their
# bounds — promtool 9x slower, serving scrapes timing out, health baselines late.) pytest exits 5
# when PYTEST_ARGS (-k ...) leave a part nothing to run: not a failure. A failing part still lets
# the others run and report; any failure fails the target. (Not loadgroup: under pytest 9.2 it
# silently stops grouping, pytest-dev/pytest-xdist#1386.)
E2E_WORKERS ?= 2
# Each tier ends with its slowest tests, so where the suite's time goes is in every log (TIMINGS= turns it off).
TIMINGS ?= --durations=15
UNIT = $(PYTEST) -n auto --dist worksteal tests --ignore=tests/e2e --ignore=tests/integration $(TIMINGS) $(PYTEST_ARGS)
INTEGRATION = $(PYTEST) -n auto --dist loadfile tests/integration $(TIMINGS) $(PYTEST_ARGS)
OK = ok() { [ $$1 -eq 0 ] || [ $$1 -eq 5 ]; }
E2E = rc=0; $(OK); \
	$(PYTEST) -n $(E2E_WORKERS) --dist loadfile --no-loadscope-reorder -m "not alone" tests/e2e $(TIMINGS) $(PYTEST_ARGS); \
	ok $$? || rc=1; \
	$(PYTEST) -m alone tests/e2e $(TIMINGS) $(PYTEST_ARGS); ok $$? || rc=1

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
