#!/usr/bin/env bash
# Make sure the Debian packages the test suite drives for real are present:
# prometheus (+promtool), prometheus-alertmanager (+amtool), prometheus-node-exporter (a peer
# in tests and benchmarks), chromium (status-page screenshot test) and docker-compose
# (validates compose.yaml; no Docker engine is needed), systemd (systemd-analyze verify), curl
# and jq (the quickstarts' commands, which tests/e2e/test_quickstarts.py runs) and victoria-metrics
# (the single-node server and vmalert: the scale e2e test remote-writes to it), slurm-wlm and munge
# (a real slurmctld + slurmd on localhost: tests/e2e/test_slurm_real.py attributes a real job).
# As root with apt, missing ones are installed; otherwise this says exactly what is missing.
set -euo pipefail

declare -A need=(
  [/usr/bin/prometheus]=prometheus
  [/usr/bin/promtool]=prometheus
  [/usr/bin/prometheus-alertmanager]=prometheus-alertmanager
  [/usr/bin/amtool]=prometheus-alertmanager
  [/usr/bin/prometheus-node-exporter]=prometheus-node-exporter
  [/usr/bin/chromium]=chromium
  [/usr/bin/docker-compose]=docker-compose
  [/usr/bin/systemd-analyze]=systemd
  [/usr/bin/curl]=curl
  [/usr/bin/jq]=jq
  [/usr/bin/victoria-metrics]=victoria-metrics
  [/usr/bin/vmalert]=victoria-metrics
  [/usr/sbin/slurmctld]=slurm-wlm
  [/usr/sbin/slurmd]=slurm-wlm
  [/usr/bin/srun]=slurm-client
  [/usr/sbin/munged]=munge
)
missing=()
for bin in "${!need[@]}"; do
  [ -x "$bin" ] || missing+=("${need[$bin]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
packages=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing Debian packages: $packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $packages >/dev/null
  # The Debian packages start their services where an init system runs; the tests start
  # their own instances on free ports, so stop any that came up.
  for svc in prometheus prometheus-alertmanager prometheus-node-exporter victoria-metrics slurmctld slurmd munge; do
    (command -v systemctl >/dev/null && systemctl stop "$svc" 2>/dev/null) || true
  done
  exit 0
fi
echo "missing Debian packages needed by the tests: $packages" >&2
echo "install them with: sudo apt-get install $packages" >&2
exit 1
