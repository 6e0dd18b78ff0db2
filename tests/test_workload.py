"""The workload source: the kubelet pod-resources API over a real gRPC unix socket, slurmd's and
the kubelet's cgroup path shapes, the PCIe topology of a sysfs-shaped tree, the PID behind an
endpoint's port, and the join series and blast radius they give (docs/attribution.md)."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest
import yaml

from health_fixtures import HOST, Feed, service_for
from infrapulse import config as config_mod
from infrapulse.health.blast import KNOWN, UNKNOWN, WorkloadIndex
from infrapulse.pci import sysfs_address
from infrapulse.simulate import workloads as demo
from infrapulse.simulate.nvml_fake import DEFAULT_DATA, FakeNvml, open_fake
from infrapulse.sources.base import SourceContext
from infrapulse.sources.workload import cgroups, procs, topology
from infrapulse.sources.workload.podresources import list_grants
from infrapulse.sources.workload.source import OPEN_FAKE_KEY, WorkloadSource
from infrapulse.store import Store

# -- cgroup shapes ------------------------------------------------------------------------------

@pytest.mark.parametrize("text, job, step, uid, pod", [
    # slurmd cgroup/v2 (Slurm 22.05+): the stepd scope, job, step, the user's tasks
    ("0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n", "4242", "0", None, ""),
    ("0::/system.slice/node7_slurmstepd.scope/job_17/step_batch/user/task_0\n", "17", "batch", None, ""),
    ("0::/system.slice/slurmstepd.scope/job_9/step_extern/slurm_processes\n", "9", "extern", None, ""),
    # cgroup/v1: a line per controller, the owner's uid in the path
    ("12:memory:/slurm/uid_1001/job_88/step_3/task_1\n4:devices:/slurm/uid_1001/job_88/step_3\n",
     "88", "3", 1001, ""),
    ("5:cpuset:/slurm_node7/uid_0/job_5/step_interactive/task_0\n", "5", "interactive", 0, ""),
    # the kubelet's systemd and cgroupfs drivers
    ("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0"
     ".slice/cri-containerd-ab12.scope\n", "", "", None, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
    ("11:pids:/kubepods/besteffort/pod0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0/ab12\n", "", "", None,
     "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
    ("0::/user.slice/user-1000.slice/session-3.scope\n", "", "", None, ""),
])
def test_cgroup_paths_name_their_workload(text, job, step, uid, pod):
    found = cgroups.classify(text)
    assert (found.slurm_job_id, found.slurm_step, found.uid, found.pod_uid) == (job, step, uid, pod)


# -- PCIe topology ------------------------------------------------------------------------------

def test_topology_links_classify_as_nvidia_smi_topo(tmp_path):
    bus_ids = [sysfs_address(g.pci_bus_id) for g in FakeNvml.from_file(DEFAULT_DATA).gpus]
    demo.write_topology(tmp_path, bus_ids)
    nics = topology.rdma_places(tmp_path)
    assert sorted(nics) == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    gpu0 = topology.gpu_place(tmp_path, "00000000:18:00.0")
    assert gpu0 is not None and gpu0.numa_node == 0 and gpu0.host_bridge == "pci0000:15"
    links = {dev: topology.link(gpu0, p) for dev, p in nics.items()}
    # its own PCIe switch; another host bridge on NUMA 0; the other socket
    assert links == {"mlx5_0": "PXB", "mlx5_1": "NODE", "mlx5_2": "SYS", "mlx5_3": "SYS"}
    same_port = topology.PciPlace("0000:1b:00.0", "pci0000:15", ("0000:15:01.0", "0000:16:00.0"), 0)
    sibling = topology.PciPlace("0000:1b:00.1", "pci0000:15", ("0000:15:01.0", "0000:16:00.0"), 0)
    other_root_port = topology.PciPlace("0000:30:00.0", "pci0000:15", ("0000:15:03.0",), 0)
    assert topology.link(same_port, sibling) == "PIX"
    assert topology.link(same_port, other_root_port) == "PHB"
    assert sysfs_address("00000000:AB:00.0") == "0000:ab:00.0"


# -- the PID behind a port ----------------------------------------------------------------------

def _proc_with_listener(root: Path, port: int, pid: int, inode: int) -> None:
    (root / "net").mkdir(parents=True)
    header = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
              "timeout inode\n")
    zeros = "00000000:00000000 00:00000000 00000000"
    zeros = "00000000:00000000 00:00000000 00000000"
    (root / "net" / "tcp").write_text(
        header + f"   0: 00000000:{port:04X} 00000000:0000 0A {zeros}  0 0 {inode} 1\n"
        + f"   1: 0100007F:{port:04X} 0100007F:D2F0 01 {zeros}  0 0 999 1\n")
    (root / "net" / "tcp6").write_text(header)
    for p, parent in ((pid, 1), (pid + 1, pid), (pid + 2, pid + 1), (777, 1)):
        d = root / str(p)
        (d / "fd").mkdir(parents=True)
        (d / "stat").write_text(f"{p} (py (worker) 1) S {parent} {p} {p} 0 -1\n")
    os.symlink(f"socket:[{inode}]", root / str(pid) / "fd" / "7")
    os.symlink("socket:[999]", root / "777" / "fd" / "3")  # an established connection, not listening


def test_the_process_listening_on_a_port_and_its_descendants(tmp_path):
    _proc_with_listener(tmp_path, 8000, 4100, 55123)
    assert procs.listening_pid(tmp_path, 8000) == 4100
    assert procs.listening_pid(tmp_path, 8001) is None
    # the PID found last time is read first and kept while it holds the socket; a stale one is not
    assert procs.listening_pid(tmp_path, 8000, hint=4100) == 4100
    assert procs.listening_pid(tmp_path, 8000, hint=777) == 4100
    assert procs.descends_from(tmp_path, 4102, 4100)  # a worker's worker
    assert not procs.descends_from(tmp_path, 777, 4100)


# -- pod-resources over a real gRPC unix socket ---------------------------------------------------

async def test_pod_resources_list_over_a_unix_socket(tmp_path):
    server = demo.PodResourcesServer(tmp_path / "kubelet.sock", {
        "trainer-0": [("main", "nvidia.com/gpu", ["GPU-a", "GPU-b"]), ("main", "rdma/hca", ["0000:1c:00.2"])],
        "idle-0": [("main", "nvidia.com/mig-1g.10gb", ["MIG-c"])]})
    await server.start()
    try:
        grants = await list_grants(str(tmp_path / "kubelet.sock"), 2.0)
    finally:
        await server.close()
    assert [(g.namespace, g.pod, g.container, g.resource, g.device_ids) for g in grants] == [
        ("llm", "idle-0", "main", "nvidia.com/mig-1g.10gb", ("MIG-c",)),
        ("llm", "trainer-0", "main", "nvidia.com/gpu", ("GPU-a", "GPU-b")),
        ("llm", "trainer-0", "main", "rdma/hca", ("0000:1c:00.2",))]
    assert server.calls == 1


# -- the source end to end ------------------------------------------------------------------------

async def _demo_source(tmp_path: Path, **overrides) -> tuple[WorkloadSource, demo.PodResourcesServer, Store]:
    data = tmp_path / "gpus.yaml"
    spec = yaml.safe_load(DEFAULT_DATA.read_text())
    for index, pids in demo.gpu_processes().items():
        spec["gpus"][index]["processes"] = pids
    data.write_text(yaml.safe_dump(spec))
    fake = FakeNvml.from_file(data)
    demo.write_topology(tmp_path / "sys", [sysfs_address(g.pci_bus_id) for g in fake.gpus])
    demo.write_procs(tmp_path / "proc")
    server = demo.PodResourcesServer(tmp_path / "k.sock", demo.demo_grants([g.uuid for g in fake.gpus]))
    await server.start()
    section = {"enabled": True, "nvml_fake": str(data), "pod_resources_socket": str(tmp_path / "k.sock"),
               "proc_root": str(tmp_path / "proc"), "sysfs_root": str(tmp_path / "sys"),
               "endpoints": [{"name": "sglang-qwen", "pods": ["sglang-qwen-0"], "namespace": "llm"},
                             {"name": "pinned", "gpus": [2]}], **overrides}
    cfg = config_mod.load_text(yaml.safe_dump({"sources": {"workload": section}}), "<test>")
    store = Store()
    ctx = SourceContext(store=store, interval=5.0, options={OPEN_FAKE_KEY: open_fake})
    return WorkloadSource(cfg.sources["workload"], ctx), server, store


def _rows(snapshot, family: str) -> set[tuple[str, ...]]:
    return set(snapshot.series.get(family, {}))


async def test_the_source_joins_pods_jobs_endpoints_and_topology(tmp_path):
    source, server, store = await _demo_source(tmp_path)
    try:
        [result] = await source.collect()
    finally:
        await server.close()
        await source.close()
    assert result.partial_errors == []
    snap = result.snapshot
    gpu = {(r[0], r[2], r[3]) for r in _rows(snap, "infrapulse_workload_gpu_info")}
    assert gpu == {("0", "slurm_job", "4242"), ("5", "slurm_job", "4243"), ("6", "slurm_job", "4243"),
                   ("7", "slurm_job", "4243"), ("1", "pod", "llm/sglang-qwen-0"),
                   ("1", "endpoint", "sglang-qwen"),
                   ("3", "pod", "llm/vllm-llama-70b-0"), ("4", "pod", "llm/vllm-llama-70b-1"),
                   ("2", "endpoint", "pinned")}
    # user names are off by default: the job's row has no slurm_user
    job = next(r for r in _rows(snap, "infrapulse_workload_gpu_info") if r[3] == "4242")
    assert job[4:] == ("", "", "", "4242", "0", "", "", "", "")  # details, then no MIG instance
    nic = {(r[0], r[1], r[3]) for r in _rows(snap, "infrapulse_workload_nic_info")}
    assert {w for d, _, w in nic if d == "mlx5_0"} == {"4242", "llm/sglang-qwen-0", "sglang-qwen"}
    assert {w for d, _, w in nic if d == "mlx5_3"} == {"4243"}
    assert ("mlx5_0", "ens1f0np0", "4242") in nic
    topo = _rows(snap, "infrapulse_topology_gpu_nic_info")
    assert len(topo) == 32 and ("0", "mlx5_0", "ens1f0np0", "0", "PXB", "true") in topo
    assert snap.series["infrapulse_workload_gpus"] == {("attributed",): 8.0, ("unattributed",): 0.0,
                                                        ("idle",): 0.0}
    assert server.calls == 1


async def test_user_names_only_when_asked(tmp_path):
    source, server, _ = await _demo_source(tmp_path, user_names=True)
    try:
        [result] = await source.collect()
    finally:
        await server.close()
        await source.close()
    job = next(r for r in _rows(result.snapshot, "infrapulse_workload_gpu_info") if r[3] == "4242")
    try:
        owner = pwd.getpwuid(demo.JOB_UID).pw_name
    except KeyError:
        owner = str(demo.JOB_UID)  # no passwd entry on this machine: the uid, never nothing
    assert job[9] == owner


async def test_an_unreachable_kubelet_and_the_budget_are_reported_not_silent(tmp_path):
    source, server, store = await _demo_source(tmp_path, max_series=3,
                                               pod_resources_socket=str(tmp_path / "nowhere.sock"))
    try:
        [result] = await source.collect()
    finally:
        await server.close()
        await source.close()
    assert result.partial_errors[0] == f"pod_resources: {tmp_path / 'nowhere.sock'} does not exist"
    assert result.partial_errors[1].startswith("budget: ") and "over max_series 3" in result.partial_errors[1]
    assert len(_rows(result.snapshot, "infrapulse_workload_gpu_info")) == 3
    coverage = store.status_of("workload", "workload").coverage
    assert {m: c.series for m, c in coverage.items()} == {
        "pod_resources": 0, "gpu_processes": 7, "endpoints": 1, "topology": 32}


# -- blast radius -----------------------------------------------------------------------------------

def _index(rows: list[tuple[str, ...]], lldp: list[tuple[str, ...]]) -> WorkloadIndex:
    feed = Feed()
    for r in rows:
        feed.gauge("workload", "infrapulse_workload_nic_info", r, 1.0, target="workload")
    for r in lldp:
        feed.gauge("gnmi", "infrapulse_switch_lldp_neighbor_info", r, 1.0, target=r[0])
    service = service_for(feed.store)
    feed.publish(service)
    return WorkloadIndex.from_readings(service.readings, HOST)


NIC_ROWS = [("mlx5_0", "ens1f0np0", "slurm_job", "4242", "", "", "", "4242", "0", "", ""),
            ("mlx5_0", "ens1f0np0", "endpoint", "sglang-qwen", "", "", "", "", "", "", "sglang-qwen"),
            ("mlx5_1", "ens2f0np0", "endpoint", "vllm-llama-70b", "", "", "", "", "", "", "vllm-llama-70b")]


def test_a_switch_port_names_only_the_workloads_of_the_nic_it_faces():
    index = _index(NIC_ROWS, [("leaf01", "swp1", HOST, "ens1f0np0"),
                              ("leaf01", "swp9", "gpu-node-02", "ens1f0np0")])
    hurt = index.affected({"switch": "leaf01", "interface": "swp1", "priority": "3"})
    assert hurt.state == KNOWN
    assert [(w.kind, w.name) for w in hurt.workloads] == [("endpoint", "sglang-qwen"), ("slurm_job", "4242")]
    assert hurt.via == f"leaf01 swp1 -> {HOST} ens1f0np0"
    other_host = index.affected({"switch": "leaf01", "interface": "swp9"})
    assert other_host.state == UNKNOWN and "faces gpu-node-02" in other_host.via
    assert index.affected({"switch": "leaf01", "interface": "swp5"}).state == UNKNOWN  # no LLDP neighbour
    assert [w.name for w in index.affected({"device": "mlx5_1", "port": "1"}).workloads] == ["vllm-llama-70b"]


def test_without_attribution_the_answer_is_unknown_never_none():
    index = _index([], [("leaf01", "swp1", HOST, "ens1f0np0")])
    for labels in ({"switch": "leaf01", "interface": "swp1"}, {"interface": "ens1f0np0"}, {"gpu": "0"}):
        hurt = index.affected(labels)
        assert hurt.state == UNKNOWN and hurt.workloads == (), labels


async def test_a_pod_granted_a_mig_instance_is_named_with_it(tmp_path):
    """The kubelet grants MIG instances by MIG uuid: the GPU row names the instance (gpu_instance,
    mig_uuid, as the per-instance GPU series carry them); the NIC it is carried to does not."""
    source, server, _ = await _demo_source(tmp_path, endpoints=[
        {"name": "mig-serve", "pods": ["mig-0"], "namespace": "llm"}])
    fake = FakeNvml.from_file(tmp_path / "gpus.yaml")
    gpu2 = fake.gpus[2]
    instance_1 = next(m.mig["uuid"] for m in gpu2.migs if m.mig["gpu_instance"] == 1)
    server.grants["mig-0"] = [("server", "nvidia.com/mig-3g.40gb", [instance_1])]
    try:
        [result] = await source.collect()
    finally:
        await server.close()
        await source.close()
    assert result.partial_errors == []
    rows = {(r[0], r[2], r[3], r[11], r[12]) for r in _rows(result.snapshot, "infrapulse_workload_gpu_info")
            if r[0] == "2"}
    assert rows == {("2", "pod", "llm/mig-0", "1", instance_1),
                    ("2", "endpoint", "mig-serve", "1", instance_1)}
    nic = {(r[0], r[3]) + tuple(r[4:]) for r in _rows(result.snapshot, "infrapulse_workload_nic_info")
           if r[3] == "llm/mig-0"}
    assert nic and all(len(r) == 9 for r in nic)  # device, workload + the 7 details: no MIG labels
