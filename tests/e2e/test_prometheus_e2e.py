"""A real Prometheus server scrapes the real daemon process over loopback."""

from __future__ import annotations

from daemon_proc import DaemonProcess
from infrapulse.simulate.sysfs_tree import write_tree
from prom import PrometheusServer


def test_prometheus_scrapes_daemon(tmp_path):
    tree = write_tree(tmp_path / "sys", devices=2)
    rcv_words = int((tree.class_dir / "mlx5_1/ports/1/counters/port_rcv_data").read_text())
    cfg = tmp_path / "node.yaml"
    cfg.write_text(f"interval: 1s\nhostname: e2e-node-7\nrole: node\n"
                   f"sources:\n  infiniband: {{sysfs_root: {tmp_path / 'sys'}}}\n")
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
            # A known counter read back through Prometheus: PMA data words x 4 = bytes.
            received = prom.wait_for('infrapulse_rdma_port_received_bytes_total{device="mlx5_1",port="1"}')
            assert float(received[0]["value"][1]) == rcv_words * 4
            source_up = prom.wait_for('infrapulse_source_up{source="infiniband"}', lambda r: len(r) == 2)
            assert {r["metric"]["target"]: r["value"][1] for r in source_up} == {"mlx5_0": "1", "mlx5_1": "1"}
