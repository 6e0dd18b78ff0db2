"""Deployment files checked offline: their structure, kubernetes-validate on every core manifest, and
infrapulse's own config loader for every config the manifests embed. The system tools (promtool,
docker-compose, systemd-analyze) check the same files in tests/e2e/test_deploy_tools.py."""

from __future__ import annotations

import copy
import posixpath
import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from infrapulse import config as config_mod

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
KUBERNETES_VERSION = "1.30.0"


# -- Prometheus ------------------------------------------------------------------------------

def test_prometheus_yml_has_node_fabric_jobs_rules_and_alertmanager():
    cfg = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in cfg["scrape_configs"]}
    assert {"infrapulse-node", "infrapulse-fabric"} <= set(jobs)
    # The health alerts watch up{job=~".*infrapulse.*"}: every exporter job must match that.
    assert all("infrapulse" in name for name in jobs if name != "prometheus")
    assert cfg["rule_files"] == ["../../alerts/*.rules.yaml"]
    assert cfg["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["alertmanager:9093"]
    for job in ("infrapulse-node", "infrapulse-fabric"):
        for sd in jobs[job]["file_sd_configs"]:
            for pattern in sd["files"]:
                assert (DEPLOY / "prometheus" / pattern).exists(), pattern


def scaling_examples() -> list[tuple[str, str]]:
    """```yaml blocks in docs/scaling.md marked with a `# promtool: check config` first line."""
    text = (ROOT / "docs" / "scaling.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    return [(b.splitlines()[1].lstrip("# ").strip() or f"example {i}", b) for i, b in enumerate(blocks)
            if b.startswith("# promtool: check config")]


def test_scaling_doc_has_checked_examples():
    assert len(scaling_examples()) >= 3


REMOTE_WRITE = DEPLOY / "prometheus" / "remote-write"
# backend -> (file, the write path its URL must end in, the external label telling HA members apart)
REMOTE_WRITE_EXAMPLES = {
    "victoriametrics": ("victoriametrics.yml", "/api/v1/write", "prometheus"),
    "victoriametrics cluster": ("victoriametrics-cluster.yml", "/insert/0/prometheus/api/v1/write",
                                "prometheus"),
    "mimir": ("mimir.yml", "/api/v1/push", "__replica__"),
    "thanos receive": ("thanos-receive.yml", "/api/v1/receive", "replica"),
}


@pytest.mark.parametrize("backend", sorted(REMOTE_WRITE_EXAMPLES))
def test_remote_write_examples_fit_an_agent(backend: str):
    """Every example can run in agent mode (no rules, no alerting: the backend's ruler evaluates
    alerts/), writes to its backend's ingestion path, labels its samples with a cluster and a
    per-server label, and scrapes both infrapulse jobs from the shipped target files.
    tests/e2e/test_deploy_tools.py runs `promtool check config --agent` on each."""
    name, path, member_label = REMOTE_WRITE_EXAMPLES[backend]
    cfg = yaml.safe_load((REMOTE_WRITE / name).read_text())
    assert not {"rule_files", "alerting"} & set(cfg)
    (remote,) = cfg["remote_write"]
    assert remote["url"].endswith(path)
    assert {"cluster", member_label} <= set(cfg["global"]["external_labels"])
    jobs = {job["job_name"]: job for job in cfg["scrape_configs"]}
    assert set(jobs) == {"infrapulse-node", "infrapulse-fabric"}
    for job in jobs.values():
        for pattern in job["file_sd_configs"][0]["files"]:
            assert list(REMOTE_WRITE.glob(pattern)), pattern
    if backend == "mimir":
        assert remote["headers"]["X-Scope-OrgID"]


def test_the_sharded_victoriametrics_example_keeps_one_hashmod_share_of_every_job():
    cfg = yaml.safe_load((REMOTE_WRITE / "victoriametrics.yml").read_text())
    for job in cfg["scrape_configs"]:
        hashmod, keep = job["relabel_configs"]
        assert hashmod == {"source_labels": ["__address__"], "modulus": 2,
                           "target_label": "__tmp_hashmod", "action": "hashmod"}
        assert keep == {"source_labels": ["__tmp_hashmod"], "regex": "0", "action": "keep"}
    assert cfg["global"]["external_labels"]["prometheus"] == "shard-0"


# -- Grafana provisioning --------------------------------------------------------------------

def test_grafana_datasource_has_fixed_uid_and_dashboards_provider_reads_the_mounted_folder():
    ds = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/infrapulse.yaml").read_text())
    prometheus = next(d for d in ds["datasources"] if d["type"] == "prometheus")
    assert prometheus["uid"] == "infrapulse-prometheus" and prometheus["isDefault"] is True
    assert prometheus["url"] == "http://prometheus:9090"
    provider = yaml.safe_load((DEPLOY / "grafana/provisioning/dashboards/infrapulse.yaml").read_text())
    (prov,) = provider["providers"]
    assert prov["type"] == "file" and prov["allowUiUpdates"] is False
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    mounts = dict(v.split(":")[:2] for v in compose["services"]["grafana"]["volumes"] if v.startswith("./"))
    assert mounts["./dashboards"] == prov["options"]["path"]
    assert mounts["./deploy/grafana/provisioning/datasources"] == "/etc/grafana/provisioning/datasources"
    assert mounts["./deploy/grafana/provisioning/dashboards"] == "/etc/grafana/provisioning/dashboards"


def test_grafana_has_a_victoriametrics_datasource_on_the_compose_service():
    ds = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/infrapulse.yaml").read_text())
    vm = next(d for d in ds["datasources"] if d["name"] == "VictoriaMetrics")
    assert vm["type"] == "prometheus" and vm["uid"] == "infrapulse-victoriametrics"
    assert vm["isDefault"] is False  # Prometheus stays the default: the profile is optional
    service = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]["victoriametrics"]
    listen = next(a.split("=", 1)[1] for a in service["command"] if a.startswith("-httpListenAddr="))
    assert vm["url"] == f"http://victoriametrics{listen}"


# -- compose and Dockerfile ------------------------------------------------------------------

def test_compose_services_pinned_built_and_mounted():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert services["infrapulse"]["build"] == "."
    assert services["infrapulse"]["command"][0] == "demo"
    for name in ("prometheus", "alertmanager", "grafana"):
        image = services[name]["image"]
        assert re.fullmatch(r"[\w./-]+:v?\d+\.\d+\.\d+", image), f"{name}: pin an exact tag, got {image}"
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"


def test_compose_prometheus_paths_resolve_inside_the_container():
    """prometheus.yml's relative rule_files and file_sd paths land on mounted repo folders."""
    prom = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]["prometheus"]
    mounts = {target: source for source, target, *_ in (v.split(":") for v in prom["volumes"])}
    config_path = next(a.split("=", 1)[1] for a in prom["command"] if a.startswith("--config.file="))
    cfg = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    wanted = list(cfg["rule_files"])
    wanted += [f for job in cfg["scrape_configs"] for sd in job.get("file_sd_configs", [])
               for f in sd["files"]]
    wanted.append(posixpath.basename(config_path))
    for relative in wanted:
        in_container = posixpath.normpath(posixpath.join(posixpath.dirname(config_path), relative))
        target = next((t for t in mounts if in_container.startswith(t + "/")), None)
        assert target, f"{in_container} is not under a mounted folder"
        on_host = ROOT / mounts[target] / posixpath.relpath(in_container, target)
        assert list(on_host.parent.glob(on_host.name)), f"{relative} -> {on_host} does not exist"


def _in_container(service: dict, path: str) -> Path:
    """The host file behind a path inside a compose service (through its read-only repo mounts)."""
    mounts = {target: source for source, target, *_ in (v.split(":") for v in service["volumes"])
              if source.startswith("./")}
    target = next((t for t in mounts if path.startswith(t + "/")), None)
    assert target, f"{path} is not under a mounted folder"
    return ROOT / mounts[target] / posixpath.relpath(path, target)


def test_compose_victoriametrics_profile_wires_agent_store_and_vmalert():
    """`--profile victoriametrics`: the agent's config and its file_sd targets, and vmalert's rule
    glob, resolve to repo files inside the containers; everything points at the compose services."""
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    profile = {name for name, s in services.items() if s.get("profiles")}
    assert profile == {"victoriametrics", "prometheus-agent", "vmalert"}
    assert all(services[name]["profiles"] == ["victoriametrics"] for name in profile)
    for name in profile:
        assert re.fullmatch(r"[\w./-]+:v\d+\.\d+\.\d+", services[name]["image"]), name
    agent = services["prometheus-agent"]
    assert "--agent" in agent["command"]
    config_path = next(a.split("=", 1)[1] for a in agent["command"] if a.startswith("--config.file="))
    cfg = yaml.safe_load(_in_container(agent, config_path).read_text())
    assert cfg["remote_write"][0]["url"] == "http://victoriametrics:8428/api/v1/write"
    for job in cfg["scrape_configs"]:
        for pattern in job["file_sd_configs"][0]["files"]:
            in_container = posixpath.normpath(posixpath.join(posixpath.dirname(config_path), pattern))
            assert _in_container(agent, in_container).exists(), pattern
    vmalert = dict(a.split("=", 1) for a in services["vmalert"]["command"])
    assert sorted(_in_container(services["vmalert"], vmalert["-rule"]).parent.glob("*.rules.yaml")) == \
        sorted((ROOT / "alerts").glob("*.rules.yaml"))
    for flag in ("-datasource.url", "-remoteWrite.url", "-remoteRead.url"):
        assert vmalert[flag] == "http://victoriametrics:8428"
    assert vmalert["-notifier.url"] == "http://alertmanager:9093"


def test_compose_alertmanager_reads_the_repo_config():
    am = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]["alertmanager"]
    mounts = {target: source for source, target, *_ in (v.split(":") for v in am["volumes"])}
    config_path = next(a.split("=", 1)[1] for a in am["command"] if a.startswith("--config.file="))
    target = posixpath.dirname(config_path)
    assert (ROOT / mounts[target] / posixpath.basename(config_path)).exists()


def test_dockerfile_pinned_non_root_and_runs_infrapulse():
    text = (ROOT / "Dockerfile").read_text()
    for base in re.findall(r"^FROM (\S+)", text, re.M):
        assert re.search(r":\d+\.\d+\.\d+", base) and "latest" not in base, base
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert 'ENTRYPOINT ["infrapulse"]' in text and "EXPOSE 9477" in text
    for source in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
        for item in source.split():
            assert (ROOT / item).exists(), f"COPY source {item} missing"


# -- example configs -------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["node.yaml", "fabric.yaml"])
def test_example_configs_load(name):
    cfg = config_mod.load_file(DEPLOY / "config" / name)
    assert cfg.role == name.removesuffix(".yaml")


# -- Kubernetes ------------------------------------------------------------------------------

def k8s_documents() -> list[dict]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def find(kind: str, name: str) -> dict:
    return next(d for d in k8s_documents() if d["kind"] == kind and d["metadata"]["name"] == name)


CORE_DOCS = [d for d in k8s_documents() if not d["apiVersion"].startswith("monitoring.coreos.com/")]


@pytest.mark.parametrize("doc", CORE_DOCS, ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_kubernetes_manifests_validate_offline(doc):
    assert kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_kubernetes_validation_catches_a_typo():
    daemonset = copy.deepcopy(find("DaemonSet", "infrapulse-node"))
    daemonset["spec"]["template"]["spec"]["hostNetwrk"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, KUBERNETES_VERSION, strict=True)


def test_kustomization_lists_every_manifest():
    listed = yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]
    present = sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == present


def _container(workload: dict) -> dict:
    (container,) = workload["spec"]["template"]["spec"]["containers"]
    return container


def _assert_least_privilege(workload: dict) -> None:
    pod = workload["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    sc = _container(workload)["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc.get("privileged") is False


def _embedded_config(configmap: str, mount_path: str, tmp_path: Path) -> config_mod.Config:
    """Load the ConfigMap's infrapulse.yaml with the real loader, its files laid out as the kubelet would."""
    data = find("ConfigMap", configmap)["data"]
    for key, value in data.items():
        (tmp_path / key).write_text(value)
    text = data["infrapulse.yaml"].replace(mount_path + "/", f"{tmp_path}/")
    return config_mod.load_text(text, f"ConfigMap {configmap}")


def test_node_daemonset_reads_host_sys_read_only_with_gpu_access(tmp_path: Path):
    ds = find("DaemonSet", "infrapulse-node")
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["runtimeClassName"] == "nvidia"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    _assert_least_privilege(ds)
    sys_volume = next(v for v in pod["volumes"] if v.get("hostPath", {}).get("path") == "/sys")
    mount = next(m for m in _container(ds)["volumeMounts"] if m["name"] == sys_volume["name"])
    assert mount["readOnly"] is True
    cfg = _embedded_config("infrapulse-node", _mount_of(ds, "config"), tmp_path)
    assert cfg.role == "node"
    assert cfg.sources["infiniband"].sysfs_root == mount["mountPath"]
    assert cfg.sources["ethtool"].sysfs_root == mount["mountPath"]
    assert _container(ds)["args"][-1].startswith(_mount_of(ds, "config"))


def _mount_of(workload: dict, volume: str) -> str:
    return next(m["mountPath"] for m in _container(workload)["volumeMounts"] if m["name"] == volume)


def test_fabric_statefulset_shards_by_pod_ordinal(tmp_path: Path):
    sts = find("StatefulSet", "infrapulse-fabric")
    _assert_least_privilege(sts)
    env = {e["name"]: e for e in _container(sts)["env"]}
    assert env["INFRAPULSE_SHARD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.labels['apps.kubernetes.io/pod-index']"
    assert int(env["INFRAPULSE_SHARD_COUNT"]["value"]) == sts["spec"]["replicas"]
    assert sts["spec"]["serviceName"] == "infrapulse-fabric"
    cfg = _embedded_config("infrapulse-fabric", _mount_of(sts, "config"), tmp_path)
    assert cfg.role == "fabric"
    gnmi = cfg.sources["gnmi"]
    # The targets file is a key of the same ConfigMap (loaded above from its materialised copy),
    # the password a key of the mounted Secret.
    assert posixpath.dirname(gnmi.targets_file) == str(tmp_path)
    assert posixpath.dirname(gnmi.defaults.password_file) == _mount_of(sts, "gnmi")
    switches = yaml.safe_load(find("ConfigMap", "infrapulse-fabric")["data"]["switches.yaml"])
    assert len(switches["targets"]) >= 2


def _field(doc: dict, path: str) -> tuple[dict | list, str | int]:
    """(parent, key) of a kustomize fieldPath like spec.a.[name=x].b in a manifest."""
    node: dict | list = doc
    parts = path.split(".")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part.startswith("[") and part.endswith("]"):
            key, value = part[1:-1].split("=", 1)
            index = next(j for j, item in enumerate(node) if item.get(key) == value)
            if last:
                return node, index
            node = node[index]
        elif last:
            return node, part
        else:
            node = node[part]
    raise AssertionError(path)


def kustomize_replicas_then_replacements(kustomization: dict, docs: list[dict]) -> list[dict]:
    """What kustomize does with this kustomization's `replicas` and then `replacements` (the
    order its builtin transformers run in): a scalar replacement copies the source's value and
    keeps the target's type (kubernetes-sigs/kustomize#4494), so an env value stays a string."""
    docs = copy.deepcopy(docs)

    def select(selector: dict) -> list[dict]:
        return [d for d in docs
                if d["kind"] == selector["kind"] and d["metadata"]["name"] == selector["name"]]

    for replica in kustomization.get("replicas", []):
        for doc in docs:
            if doc["metadata"]["name"] == replica["name"] and "replicas" in doc.get("spec", {}):
                doc["spec"]["replicas"] = replica["count"]
    for replacement in kustomization.get("replacements", []):
        (source,) = select(replacement["source"])
        parent, key = _field(source, replacement["source"]["fieldPath"])
        value = parent[key]
        for target in replacement["targets"]:
            for doc in select(target["select"]):
                for path in target["fieldPaths"]:
                    parent, key = _field(doc, path)
                    parent[key] = type(parent[key])(value)
    return docs


def test_fabric_shard_count_follows_the_replica_count(tmp_path: Path):
    """The base and deploy/kubernetes-fabric-shards/: INFRAPULSE_SHARD_COUNT is the StatefulSet's
    replica count after kustomize (checked by hand with kubectl kustomize, kustomize v5.5.0), a
    string, and the scaled StatefulSet still validates."""
    base = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    overlay_dir = DEPLOY / "kubernetes-fabric-shards"
    overlay = yaml.safe_load((overlay_dir / "kustomization.yaml").read_text())
    assert [posixpath.normpath(posixpath.join("deploy/kubernetes-fabric-shards", r))
            for r in overlay["resources"]] == ["deploy/kubernetes"]
    assert overlay["replacements"] == base["replacements"]
    (replicas,) = overlay["replicas"]
    built = kustomize_replicas_then_replacements(base, k8s_documents())
    built = kustomize_replicas_then_replacements(overlay, built)
    (sts,) = [d for d in built if d["kind"] == "StatefulSet" and d["metadata"]["name"] == "infrapulse-fabric"]
    env = {e["name"]: e for e in _container(sts)["env"]}
    unscaled = find("StatefulSet", "infrapulse-fabric")["spec"]["replicas"]
    assert sts["spec"]["replicas"] == replicas["count"] != unscaled
    assert env["INFRAPULSE_SHARD_COUNT"]["value"] == str(replicas["count"])
    assert kubernetes_validate.validate(sts, KUBERNETES_VERSION, strict=True)


def test_services_and_monitors_select_the_pods():
    for component, workload in (("node", find("DaemonSet", "infrapulse-node")),
                                ("fabric", find("StatefulSet", "infrapulse-fabric"))):
        pod_labels = workload["spec"]["template"]["metadata"]["labels"]
        service = find("Service", f"infrapulse-{component}")
        assert service["spec"]["selector"].items() <= pod_labels.items()
        port_names = {p["name"] for p in _container(workload)["ports"]}
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names
    service_monitor = find("ServiceMonitor", "infrapulse-node")
    node_service = find("Service", "infrapulse-node")
    selector = service_monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= node_service["metadata"]["labels"].items()
    port_names = {p["name"] for p in node_service["spec"]["ports"]}
    assert service_monitor["spec"]["endpoints"][0]["port"] in port_names
    pod_monitor = find("PodMonitor", "infrapulse-fabric")
    fabric_pods = find("StatefulSet", "infrapulse-fabric")["spec"]["template"]["metadata"]["labels"]
    assert pod_monitor["spec"]["selector"]["matchLabels"].items() <= fabric_pods.items()
    for monitor in (service_monitor, pod_monitor):
        assert monitor["apiVersion"] == "monitoring.coreos.com/v1"


# -- systemd ---------------------------------------------------------------------------------

def test_systemd_unit_is_hardened():
    """The settings; `systemd-analyze security` rates the same unit in tests/e2e/test_deploy_tools.py."""
    unit = (DEPLOY / "systemd" / "infrapulse.service").read_text()
    settings = dict(line.split("=", 1) for line in unit.splitlines()
                    if "=" in line and not line.startswith("#"))
    assert settings["User"] == "infrapulse" and settings["ProtectSystem"] == "strict"
    assert settings["CapabilityBoundingSet"] == "" and settings["NoNewPrivileges"] == "yes"
    assert "/sys" in settings["ReadOnlyPaths"].split()
    assert settings["AmbientCapabilities"] == "" and settings["PrivateMounts"] == "yes"
