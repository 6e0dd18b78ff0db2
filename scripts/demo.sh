#!/usr/bin/env bash
# Placeholder until the local-stack demo script lands: the daemon on the simulated fabric.
exec .venv/bin/infrapulse demo --listen "${INFRAPULSE_LISTEN:-127.0.0.1:9477}" "$@"
