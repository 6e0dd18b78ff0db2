"""A real Prometheus server scrapes the real daemon process over loopback."""

from __future__ import annotations

from daemon_proc import DaemonProcess
from prom import PrometheusServer


def test_prometheus_scrapes_daemon(tmp_path):
    cfg = tmp_path / "node.yaml"
    cfg.write_text("interval: 1s\nhostname: e2e-node-7\nrole: node\n")
    with DaemonProcess(["run", "--config", str(cfg)]) as daemon:
        daemon.wait_ready()
        with PrometheusServer(tmp_path, {"infrapulse": [f"127.0.0.1:{daemon.port}"]}) as prom:
            prom.wait_ready()
            up = prom.wait_for('up{job="infrapulse"}', lambda r: r and r[0]["value"][1] == "1")
            assert up[0]["metric"]["instance"] == f"127.0.0.1:{daemon.port}"
            info = prom.wait_for("infrapulse_node_info")
            assert info[0]["metric"]["hostname"] == "e2e-node-7"
            assert info[0]["metric"]["role"] == "node"
            assert info[0]["value"][1] == "1"
