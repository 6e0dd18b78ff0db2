"""The workload source: slurmd's and the kubelet's cgroup path shapes, the PCIe topology of a
sysfs-shaped tree, the PID behind an endpoint's port, and the blast radius the join series give
(docs/attribution.md). The kubelet pod-resources API over a real gRPC unix socket and the source
end to end (its join series) are in tests/integration/test_workload_grpc.py."""

from __future__ import annotations

import os
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


# -- the demo source, for the end-to-end tests under tests/integration/ ---------------------------

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
