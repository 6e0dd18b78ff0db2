"""The quickstarts run, command by command, against simulated hardware (issue 18), so they cannot
rot: docs/quickstart-node.md on an mlx5 sysfs tree with ethtool statistics, the NVML fake and a
simulated vLLM; docs/quickstart-switch.md on a simulated SONiC switch behind TLS and a password.
How a quickstart is walked (files, commands, expected output): tests/e2e/quickstart_walk.py."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from conftest import free_port
from infrapulse.simulate.certs import make_test_pki
from infrapulse.simulate.gnmi_target import GnmiTarget, SimSwitch
from infrapulse.simulate.nic_stats import write_stats
from infrapulse.simulate.roce_cc import RoceConfigSimulator
from infrapulse.simulate.scenarios import ScenarioBoard
from infrapulse.simulate.serving_engines import EngineServer
from infrapulse.simulate.sysfs_tree import DeviceSpec, PortSpec, write_tree
from quickstart_walk import ROOT, Walk

GPUS = """driver_version: "570.133.20"
cuda_driver_version: 12080
models:
  H100: {name: NVIDIA H100 80GB HBM3, memory_total: 85520809984, memory_reserved: 567279616,
         power_limit_w: 700, clock_sm_mhz: 1980, clock_mem_mhz: 2619, nvlinks: 18,
         memory_repair: row_remapping, mig_slots: 7}
gpus:
""" + "".join("  - {model: H100, utilization: 60, power_w: 500.0, temperature: 55}\n" for _ in range(8))
# What the walk does not run: cloning and installing (the test runs from an installed checkout),
# and talking to services it does not start (a Prometheus to reload, Grafana to restart).
NODE_SKIPPED = ["git clone https://github.com/infrapulse/infrapulse.git", "cd infrapulse",
                "python3 -m pip install .", "curl -s -X POST http://localhost:9090/-/reload",
                "sudo systemctl restart grafana-server"]
SWITCH_SKIPPED = ["curl -s -X POST http://localhost:9090/-/reload"]


def _common(tmp: Path, port: int) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    forward = [("sudo ", ""), ("/etc/infrapulse/", f"{tmp}/etc/infrapulse/"),
               ("/etc/prometheus/", f"{tmp}/etc/prometheus/"), ("/etc/grafana/", f"{tmp}/etc/grafana/"),
               ("/var/lib/grafana/", f"{tmp}/var/lib/grafana/"),
               ("0.0.0.0:9477", f"127.0.0.1:{port}"), ("localhost:9477", f"localhost:{port}")]
    backward = [(re.escape(f"{tmp}/etc/infrapulse/"), "/etc/infrapulse/"),
                (re.escape(f"{tmp}/etc/prometheus/"), "/etc/prometheus/"),
                (re.escape(f"127.0.0.1:{port}"), "0.0.0.0:9477"),
                (re.escape(f"localhost:{port}"), "localhost:9477")]
    return forward, backward


async def test_node_quickstart(tmp_path):
    roce = [DeviceSpec(f"mlx5_{i}", ports=[PortSpec(link_layer="Ethernet", netdev=f"ens{i + 1}f0np0",
                                                    rate="400 Gb/sec (4X NDR)")]) for i in range(4)]
    write_tree(tmp_path / "sys", roce)
    write_stats(tmp_path / "ethtool", [f"ens{i + 1}f0np0" for i in range(4)])
    # The NICs' CC/QoS tree (sysfs ecn/, qos/) and the file-backed DCB and driver-info stand-in.
    RoceConfigSimulator(tmp_path / "sys", tmp_path / "roce", [f"ens{i + 1}f0np0" for i in range(4)],
                        ScenarioBoard()).step()
    (tmp_path / "gpus.yaml").write_text(GPUS)
    vllm = EngineServer("vllm")
    await vllm.start(free_port())
    port = free_port()
    forward, backward = _common(tmp_path, port)
    forward += [("sysfs_root: /sys", f"sysfs_root: {tmp_path}/sys"),
                ("http://127.0.0.1:8000/metrics", vllm.url)]
    backward += [(re.escape(f"{tmp_path}/sys"), "/sys"), (re.escape(vllm.url), "http://127.0.0.1:8000/metrics"),
                 (r" \(NVML fake: [^)]*\)", "")]

    def simulate(path: Path) -> None:
        """The config as written, plus the testing keys that replace real hardware."""
        if path.name == "node.yaml":
            cfg = yaml.safe_load(path.read_text())
            cfg["sources"]["ethtool"]["stats_dir"] = str(tmp_path / "ethtool")
            cfg["sources"]["nvml"]["fake"] = str(tmp_path / "gpus.yaml")
            cfg["sources"]["roce_config"]["sim_dir"] = str(tmp_path / "roce")
            # the host's kernel log says what this machine did: a quiet log of our own instead
            (tmp_path / "kmsg").write_text("")
            cfg["sources"].setdefault("kmsg", {})["path"] = str(tmp_path / "kmsg")
            path.write_text(yaml.safe_dump(cfg))

    walk = Walk(tmp_path, port, forward, backward, set(NODE_SKIPPED), adapt_file=simulate)
    try:
        await walk.run((ROOT / "docs" / "quickstart-node.md").read_text())
    finally:
        await vllm.stop()
    assert walk.skipped == NODE_SKIPPED
    assert "infrapulse doctor /etc/infrapulse/node.yaml" in walk.ran
    assert len(list((tmp_path / "var/lib/grafana/dashboards/infrapulse").glob("*.json"))) == \
        len(list((ROOT / "dashboards").glob("*.json"))) >= 5
    assert sorted(p.name for p in (tmp_path / "etc/prometheus/rules").glob("*.rules.yaml")) == \
        sorted(p.name for p in (ROOT / "alerts").glob("*.rules.yaml"))


async def test_switch_quickstart(tmp_path):
    pki = make_test_pki(tmp_path / "pki", names=("leaf01",))
    neighbors = {i: (f"gpu-node-0{i + 1}", f"ens{i + 1}f0np0") for i in range(4)}
    switch = GnmiTarget(SimSwitch("leaf01", "sonic", ports=8, neighbors=neighbors), username="telemetry",
                        password="gnmi-pa55word", tls=(pki.read("server_cert"), pki.read("server_key")))
    await switch.start()
    port = free_port()
    forward, backward = _common(tmp_path, port)
    forward += [("10.0.0.11:9339", switch.address), ("switch-ca.pem", str(pki.ca_file))]
    backward += [(re.escape(switch.address), "10.0.0.11:9339")]
    walk = Walk(tmp_path, port, forward, backward, set(SWITCH_SKIPPED),
                env={"GNMI_PASSWORD": "gnmi-pa55word"})
    try:
        await walk.run((ROOT / "docs" / "quickstart-switch.md").read_text())
    finally:
        await switch.stop()
    assert walk.skipped == SWITCH_SKIPPED
    assert "infrapulse doctor /etc/infrapulse/fabric.yaml" in walk.ran
    assert (tmp_path / "etc/infrapulse/gnmi/password").read_text() == "gnmi-pa55word"
    assert (tmp_path / "etc/infrapulse/gnmi/password").stat().st_mode & 0o077 == 0o040  # 0640
