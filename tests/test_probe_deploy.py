"""What the probes need from the deployment, checked offline: the state directory in the default
systemd unit and DaemonSet (and nothing more there), the opt-in systemd drop-in and DaemonSet
variant, and the Job template writing into the inbox the daemon watches."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

from infrapulse import config as config_mod

ROOT = Path(__file__).resolve().parent.parent
K8S = ROOT / "deploy" / "kubernetes"
SYSTEMD = ROOT / "deploy" / "systemd"
VERSION = "1.30.0"


def unit_settings(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            out.setdefault(key, []).append(value)
    return out


def test_systemd_unit_keeps_state_but_none_of_the_probe_privileges():
    unit = unit_settings((SYSTEMD / "infrapulse.service").read_text())
    assert unit["StateDirectory"] == ["infrapulse"] and unit["StateDirectoryMode"] == ["0700"]
    assert "LimitMEMLOCK" not in unit and "ProcSubset" in unit and unit["ProcSubset"] == ["pid"]
    assert not [d for d in unit["DeviceAllow"] if "infiniband" in d]
    assert "~@privileged @resources" in unit["SystemCallFilter"]
    # the default config's state_dir is the directory StateDirectory= creates
    assert config_mod.default_config().state_dir == "/var/lib/" + unit["StateDirectory"][0]


def test_systemd_probe_drop_in_adds_exactly_what_the_probes_need():
    drop_in = unit_settings((SYSTEMD / "infrapulse-probes.conf").read_text())
    assert drop_in["DeviceAllow"] == ["char-infiniband_verbs rw", "/dev/infiniband/rdma_cm rw",
                                      "/dev/nvidia-uvm-tools rw", "char-nvidia-caps rw"]
    assert drop_in["LimitMEMLOCK"] == ["infinity"] and drop_in["ProcSubset"] == ["all"]
    assert drop_in["SystemCallFilter"] == ["setpriority ioprio_set"]
    assert "CapabilityBoundingSet" not in drop_in and "AmbientCapabilities" not in drop_in


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def node_daemonset() -> dict[str, Any]:
    return next(d for d in documents(K8S / "node.yaml") if d["kind"] == "DaemonSet")


def node_config(doc: dict[str, Any]) -> config_mod.Config:
    return config_mod.load_text(doc["data"]["infrapulse.yaml"], "ConfigMap")


def test_daemonset_keeps_state_dir_on_the_node_with_a_chown_only_init_container():
    ds = node_daemonset()
    pod = ds["spec"]["template"]["spec"]
    state = next(v for v in pod["volumes"] if v["name"] == "state")
    assert state["hostPath"] == {"path": "/var/lib/infrapulse", "type": "DirectoryOrCreate"}
    (container,) = pod["containers"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "state")
    cfg = node_config(next(d for d in documents(K8S / "node.yaml") if d["kind"] == "ConfigMap"))
    assert cfg.state_dir == mount["mountPath"] and not cfg.sources["probe"].enabled
    (init,) = pod["initContainers"]
    assert init["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert init["command"] == ["/bin/chown", "10001:10001", mount["mountPath"]]
    assert pod["securityContext"]["runAsUser"] == 10001
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}  # unchanged


def merge(base: Any, patch: Any) -> Any:
    """Kubernetes strategic merge for what the patches use: maps merge, lists of named items merge by
    name, other lists are replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            out[key] = merge(base[key], value) if key in base else value
        return out
    if isinstance(base, list) and isinstance(patch, list) and all(isinstance(x, dict) and "name" in x
                                                                  for x in base + patch):
        merged = [copy.deepcopy(x) for x in base]
        for item in patch:
            found = next((i for i, x in enumerate(merged) if x["name"] == item["name"]), None)
            if found is None:
                merged.append(item)
            else:
                merged[found] = merge(merged[found], item)
        return merged
    return patch


def test_probe_variant_patches_validate_and_configure_the_probe_source():
    overlay = yaml.safe_load((K8S / "probes" / "kustomization.yaml").read_text())
    assert overlay["resources"] == [".."]
    patches = {p["path"]: documents(K8S / "probes" / p["path"])[0] for p in overlay["patches"]}
    ds = merge(node_daemonset(), patches["daemonset-probes.yaml"])
    assert kubernetes_validate.validate(ds, VERSION, strict=True)
    (container,) = ds["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK"]}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False  # kept from the base
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert {"sys", "config", "tmp", "state", "probe-tools"} <= set(mounts)
    configmap = merge(next(d for d in documents(K8S / "node.yaml") if d["kind"] == "ConfigMap"),
                      patches["config-probes.yaml"])
    cfg = node_config(configmap)
    probe = cfg.sources["probe"]
    assert probe.enabled and cfg.state_dir == mounts["state"]
    assert probe.versions.sysfs_root == mounts["sys"] == cfg.sources["infiniband"].sysfs_root
    assert probe.versions.nccl_library.startswith(mounts["probe-tools"] + "/")
    assert probe.inbox.dir.startswith(mounts["state"] + "/")


def test_job_template_writes_into_the_inbox_the_daemon_watches():
    (cronjob,) = documents(K8S / "probes" / "nccl-tests-job.yaml")
    assert kubernetes_validate.validate(cronjob, VERSION, strict=True)
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    inbox = next(v for v in pod["volumes"] if v["name"] == "inbox")["hostPath"]["path"]
    cfg = node_config(next(d for d in documents(K8S / "node.yaml") if d["kind"] == "ConfigMap"))
    assert inbox == cfg.sources["probe"].inbox.dir
    assert pod["securityContext"]["runAsUser"] == node_daemonset()["spec"]["template"]["spec"][
        "securityContext"]["runAsUser"]  # the daemon creates the inbox: same user, can write
    script = container["args"][0]
    # the scope sidecar first, the result renamed into place last (the daemon skips dot files)
    assert script.index(".scope") < script.index("all_reduce_perf") < script.index("mv ")
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 8}
    assert cronjob["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] > 0
