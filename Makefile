# Self-bootstrapping targets: each creates .venv and installs what it needs on first use.
#   make demo   the daemon on the built-in simulated fabric (+ local Prometheus/Alertmanager if installed)
#   make test   the whole test suite (installs Debian test dependencies when run as root)
#   make bench  side-by-side benchmarks against their peers
#   make lint   ruff
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test bench lint docs system-deps clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

system-deps:
	@scripts/system-deps.sh

demo: $(STAMP)
	@scripts/demo.sh

test: $(STAMP) system-deps
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

# The side-by-side benchmarks (bench/nvml_real_gpu.py needs a real GPU and is run by hand).
BENCHES := node_scrape serving_scrape nvml_poll gnmi_ingest load_soak

bench: $(STAMP) system-deps
	@for b in $(BENCHES); do echo "== bench/$$b.py"; $(PY) bench/$$b.py || exit 1; done

lint: $(STAMP)
	$(PY) -m ruff check exporter tests bench scripts dashboards alerts fuzz

docs: $(STAMP)
	$(PY) -m infrapulse docs --write

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
