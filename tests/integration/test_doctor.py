"""`infrapulse doctor`: check-config plus the host, against the simulators: a sysfs tree with mlx5
RoCE and InfiniBand ports, ethtool statistics files, the NVML fake, a gNMI target behind TLS and
a password, and serving engines. Every row is asserted by value, and each kind of problem (a wrong
password, an encoding the profile cannot use, a missing CA file, an engine that does not answer,
an empty password file) turns into a FAIL row and exit code 1 without the secret in the output."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import yaml
from pygnmi.spec.v080 import gnmi_pb2 as pb

from conftest import free_port
from infrapulse.cli import source_options
from infrapulse.config import load_text
from infrapulse.doctor.cli import run_checks
from infrapulse.doctor.files import check_reference
from infrapulse.simulate.certs import make_test_pki
from infrapulse.simulate.gnmi_target import GnmiTarget, SimSwitch
from infrapulse.simulate.nic_stats import write_stats
from infrapulse.simulate.nvml_fake import DEFAULT_DATA
from infrapulse.simulate.serving_engines import EngineServer
from infrapulse.simulate.sysfs_tree import DeviceSpec, PortSpec, write_tree
from infrapulse.sources import registry

PASSWORD = "doctor-s3cret-pw"
CA_KEY = "sources.gnmi.defaults.tls.ca_file"


def _node_tree(root: Path) -> None:
    roce = [DeviceSpec(f"mlx5_{i}", ports=[PortSpec(link_layer="Ethernet", netdev=f"ens{i + 1}f0np0",
                                                    rate="400 Gb/sec (4X NDR)")]) for i in range(2)]
    ib = DeviceSpec("mlx5_2", ports=[PortSpec(rate="400 Gb/sec (4X NDR)")])
    write_tree(root / "sys", [*roce, ib])
    write_stats(root / "ethtool", ["ens1f0np0", "ens2f0np0"])


@contextlib.asynccontextmanager
async def _simulators(tmp_path: Path):
    _node_tree(tmp_path)
    pki = make_test_pki(tmp_path / "pki", names=("leaf01",))
    switch = GnmiTarget(SimSwitch("leaf01", "sonic", ports=4), username="infrapulse", password=PASSWORD,
                        tls=(pki.read("server_cert"), pki.read("server_key")))
    vllm, tgi = EngineServer("vllm"), EngineServer("tgi")
    await switch.start()
    await vllm.start(free_port())
    await tgi.start(free_port())
    try:
        yield pki, switch, vllm, tgi
    finally:
        await switch.stop()
        await vllm.stop()
        await tgi.stop()


def _config(tmp_path: Path, pki, switch: GnmiTarget, vllm: EngineServer, tgi: EngineServer, **gnmi) -> Path:
    (tmp_path / "password").write_text(PASSWORD + "\n")
    cfg = {
        "interval": "5s",
        "sources": {
            "infiniband": {"enabled": True, "sysfs_root": str(tmp_path / "sys")},
            "ethtool": {"sysfs_root": str(tmp_path / "sys"), "stats_dir": str(tmp_path / "ethtool")},
            "nvml": {"enabled": True, "fake": str(DEFAULT_DATA)},
            "gnmi": {"defaults": {"profile": "sonic", "username": "infrapulse",
                                  "password_file": str(tmp_path / "password"),
                                  "tls": {"ca_file": str(pki.ca_file), "server_name": "leaf01"}, **gnmi},
                     "targets": [{"name": "leaf01", "address": switch.address}]},
            "serving": {"endpoints": [{"name": "llama", "url": vllm.url},
                                      {"name": "mistral", "url": tgi.url}]},
        },
    }
    path = tmp_path / "node.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _rows(checks) -> dict[tuple[str, str], tuple[str, str]]:
    return {(c.area, c.target): (c.result, c.detail) for c in checks}


def _fixes(checks) -> dict[tuple[str, str], str]:
    return {(c.area, c.target): c.fix for c in checks}


async def test_doctor_passes_on_a_host_that_matches_its_config(tmp_path):
    async with _simulators(tmp_path) as (pki, switch, vllm, tgi):
        path = _config(tmp_path, pki, switch, vllm, tgi)
        code, checks = await run_checks(str(path), source_options)
    rows = _rows(checks)
    assert code == 0, [c for c in checks if c.result == "FAIL"]
    assert rows[("config", str(path))] == ("ok", "valid: listen 0.0.0.0:9477, interval 5s")
    # RDMA devices with the netdev behind each RoCE port, and the InfiniBand one.
    assert rows[("infiniband", "mlx5_0")] == ("ok", "port 1 RoCE -> ens1f0np0 (ACTIVE)")
    assert rows[("infiniband", "mlx5_1")] == ("ok", "port 1 RoCE -> ens2f0np0 (ACTIVE)")
    assert rows[("infiniband", "mlx5_2")] == ("ok", "port 1 InfiniBand (ACTIVE)")
    # ethtool found exactly the netdevs behind the RDMA ports, each with its statistics mapped.
    ethtool = {t: r for (a, t), r in rows.items() if a == "ethtool"}
    assert set(ethtool) == {"ens1f0np0", "ens2f0np0"}
    assert all(result == "ok" and "driver statistics" in detail for result, detail in ethtool.values())
    assert rows[("nvml", "nvml")][0] == "ok" and "driver 570.133.20, 8 GPU(s)" in rows[("nvml", "nvml")][1]
    # gNMI over TLS with the password: Capabilities answered, SONiC's profile gets JSON_IETF, and
    # one Get per mapping: the Mellanox platform has one of the four PFC pause families, and no
    # LLDP neighbour is cabled; the 202511 profile reads the PG watermarks this release has too.
    assert rows[("gnmi", "leaf01")] == (
        "ok", f"{switch.address} (TLS): gNMI 0.8.0, encodings JSON_IETF; profile sonic will use json_ietf; "
              "22 of 26 mappings answered a Get; sonic-202511 answers 24 of 28")
    assert rows[("serving", "llama")][0] == "ok" and "engine vllm" in rows[("serving", "llama")][1]
    assert rows[("serving", "mistral")][0] == "ok" and "engine tgi" in rows[("serving", "mistral")][1]
    # Files the config names: the CA is a certificate, the password is read but never shown.
    assert rows[("file", CA_KEY)] == ("ok", f"{pki.ca_file}: 1 PEM certificate(s)")
    assert rows[("file", "sources.gnmi.defaults.password_file")][0] == "ok"
    assert all(PASSWORD not in c.detail for c in checks)
    assert rows[("dcgm", "-")] == ("skip", "disabled (enabled: false)")


async def test_doctor_names_every_problem_and_exits_1(tmp_path):
    async with _simulators(tmp_path) as (pki, switch, vllm, tgi):
        path = _config(tmp_path, pki, switch, vllm, tgi)
        (tmp_path / "password").write_text("wrong-password\n")
        code, checks = await run_checks(str(path), source_options)
        rows = _rows(checks)
        assert code == 1
        assert rows[("gnmi", "leaf01")][0] == "FAIL" and "unauthenticated" in rows[("gnmi", "leaf01")][1]
        assert _fixes(checks)[("gnmi", "leaf01")] == (
            "user name or password wrong (the password itself is never shown)")
        assert all("wrong-password" not in c.detail for c in checks)

        # The CA file gone; an engine that stopped.
        path = _config(tmp_path, pki, switch, vllm, tgi)
        cfg = yaml.safe_load(path.read_text())
        cfg["sources"]["gnmi"]["defaults"]["tls"]["ca_file"] = str(tmp_path / "missing-ca.pem")
        path.write_text(yaml.safe_dump(cfg))
        await tgi.stop()
        code, checks = await run_checks(str(path), source_options)
    rows = _rows(checks)
    assert code == 1
    assert rows[("file", CA_KEY)] == ("FAIL", f"{tmp_path / 'missing-ca.pem'}: does not exist")
    assert rows[("gnmi", "leaf01")][0] == "FAIL" and "cannot read tls.ca_file" in rows[("gnmi", "leaf01")][1]
    result, detail = rows[("serving", "mistral")]
    assert result == "FAIL" and "connection_refused" in detail
    fixes = _fixes(checks)
    assert fixes[("serving", "mistral")] == "the engine is not running, or serves its metrics on another port"
    assert fixes[("file", CA_KEY)] == "create it, or correct the path in the config"
    assert all(c.fix for c in checks if c.result in ("FAIL", "warn"))
    assert rows[("serving", "llama")][0] == "ok"


async def test_doctor_checks_the_profile_encoding_against_capabilities(tmp_path):
    async with _simulators(tmp_path) as (pki, switch, vllm, tgi):
        path = _config(tmp_path, pki, switch, vllm, tgi)  # profile sonic: JSON_IETF only
        switch.encodings = (pb.PROTO, pb.JSON)  # a switch that is not SONiC
        code, checks = await run_checks(str(path), source_options)
    result, detail = _rows(checks)[("gnmi", "leaf01")]
    assert code == 1 and result == "FAIL"
    assert detail == (f"{switch.address}: encoding: the switch supports PROTO, JSON; "
                      "profile sonic needs one of json_ietf")
    assert _fixes(checks)[("gnmi", "leaf01")] == "the profile does not fit this NOS (step 3)"


def test_file_checks_by_kind(tmp_path):
    empty = tmp_path / "token"
    empty.write_text("\n")
    cert = tmp_path / "ca.pem"
    cert.write_text("not a certificate\n")
    assert check_reference("x.bearer_token_file", "bearer_token_file", str(empty)).detail == f"{empty}: empty"
    assert check_reference("x.ca_file", "ca_file", str(cert)).detail == f"{cert}: no PEM certificate in it"
    assert check_reference("x.key_file", "key_file", str(cert)).result == "FAIL"
    assert check_reference("x.sysfs_root", "sysfs_root", str(cert)).detail == f"{cert}: not a directory"
    assert check_reference("x.password_env", "password_env", "NOPE", env={}).result == "FAIL"
    ok = check_reference("x.password_env", "password_env", "GNMI_PW", env={"GNMI_PW": "hunter2"})
    assert ok.result == "ok" and "hunter2" not in ok.detail


def test_each_source_says_in_its_own_terms_why_it_does_not_run(tmp_path):
    cfg = load_text(f"sources:\n  serving: {{enabled: false}}\n  workload: {{pod_resources_socket: ''}}\n"
                    f"  ethtool: {{sysfs_root: {tmp_path}}}\n")

    def why(config, name: str) -> str:
        return registry()[name].not_wanted(config.sources[name])

    assert why(cfg, "serving") == "disabled (enabled: false)"
    assert why(load_text(""), "serving") == "no endpoints configured"
    assert why(cfg, "gnmi") == "no targets or targets_file configured"
    assert why(cfg, "workload") == "enabled: auto and no kubelet socket (none), NVML device or endpoints here"
    assert why(cfg, "ethtool") == (
        f"enabled: auto and {tmp_path}/class/infiniband does not exist (no RDMA device here)")
    assert why(cfg, "dcgm") == "disabled (enabled: false)"  # off by default


def test_doctor_cli_prints_all_config_errors_and_exits_2(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("interval: 5s\ninterval: 10s\nhealth: {window: 5x}\nsources: {nosuch: {}}\n")
    proc = subprocess.run([sys.executable, "-m", "infrapulse", "doctor", str(path), "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    checks = json.loads(proc.stdout)["checks"]
    assert [(c["target"], c["result"]) for c in checks] == [
        ("interval", "FAIL"), ("health.window", "FAIL"), ("sources.nosuch", "FAIL")]
    assert checks[0]["detail"] == "duplicate key (line 2; first at line 1): YAML keeps only the last one"


def test_doctor_cli_table_has_a_header_and_a_summary(tmp_path):
    _node_tree(tmp_path)
    path = tmp_path / "node.yaml"
    path.write_text(f"sources:\n  infiniband: {{enabled: true, sysfs_root: {tmp_path / 'sys'}}}\n"
                    f"  ethtool: {{enabled: false}}\n  nvml: {{enabled: false}}\n")
    proc = subprocess.run([sys.executable, "-m", "infrapulse", "doctor", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["check", "target", "result", "detail"]
    assert any(line.split()[:3] == ["infiniband", "mlx5_2", "ok"] for line in lines)
    assert lines[-1] == f"doctor: all {len(lines) - 4} checks passed"
