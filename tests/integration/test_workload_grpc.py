"""The workload source over a real gRPC unix socket: the kubelet pod-resources API served by the
simulator, and the source end to end against it (pods, Slurm jobs, endpoints and PCIe topology
joined, user names only when asked, an unreachable kubelet and the series budget reported, a MIG
instance named on its GPU row). The integration half of tests/test_workload.py."""

from __future__ import annotations

import pwd

from infrapulse.simulate import workloads as demo
from infrapulse.simulate.nvml_fake import FakeNvml
from infrapulse.sources.workload.podresources import list_grants
from test_workload import _demo_source, _rows

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
