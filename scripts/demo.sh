#!/usr/bin/env bash
# `make demo`: the daemon on the simulated fabric plus, where the Debian binaries are installed,
# a local Prometheus (the repo's rules) and Alertmanager on loopback ports. Ctrl-C stops all.
# Options are passed through, e.g. scripts/demo.sh --scenario pfc-storm --scrape-interval 2s
cd "$(dirname "$0")/.." || exit 1
exec .venv/bin/python scripts/demo_stack.py "$@"
