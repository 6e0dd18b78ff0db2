"""The signals' label names come from the catalogue alone: a fresh interpreter (a subprocess) that
imports only the signals has every family they read declared, with the labels the signals key on.
The integration half of tests/test_health_signals.py."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path


def test_the_signals_import_every_family_they_read_into_the_catalogue():
    """Label names come from the catalogue alone: importing the signals (and nothing else, as in
    a fresh interpreter) declares every family they read, with the labels the signals key on."""
    code = ("import infrapulse.health.signals as s, infrapulse.catalog as c\n"
            "print(sorted({f: c.get(f).labels for x in s.SIGNALS.values() for f in x.families + x.counters}"
            ".items()))")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "exporter")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    labels = dict(ast.literal_eval(out.stdout))
    assert len(labels) == 74  # 71 + the kernel log's events and records + the RDMA devices (kmsg naming)
    assert labels["infrapulse_kmsg_events_total"] == ("kind", "pci_address", "code", "severity")
    assert labels["infrapulse_rdma_device_info"][0] == "device"
    assert labels["infrapulse_rdma_device_info"][-1] == "pci_address"
    assert labels["infrapulse_nic_roce_ecn_enabled"] == ("interface", "role", "priority")
    assert labels["infrapulse_nic_link_recoveries_total"] == ("interface",)
    assert labels["infrapulse_nic_pfc_pause_duration_seconds_total"] == ("interface", "priority", "direction")
    assert labels["infrapulse_rdma_port_info"] == ("device", "port", "link_layer", "netdev")
    assert labels["infrapulse_nic_global_pause_duration_seconds_total"] == ("interface", "direction")
    assert labels["infrapulse_switch_lldp_neighbor_info"][:2] == ("switch", "interface")
    assert labels["infrapulse_gpu_xid_errors_total"] == ("gpu", "uuid", "xid")
    assert labels["infrapulse_llm_requests_total"][:4] == ("endpoint", "engine", "model", "outcome")
    assert labels["infrapulse_probe_baseline_ratio"] == ("scope", "path", "test", "metric", "size")
