"""Slurm GRES allocations through the workload source (issue 32): the source runs a real
executable in scontrol's place, beside the kubelet pod-resources gRPC socket the demo serves, and
names a job on a GPU it holds where none of its processes runs; a failing or missing scontrol is a
partial error, not silence. The integration half of tests/test_workload_slurm.py."""

from __future__ import annotations

import asyncio

from test_workload import _demo_source, _rows
from test_workload_slurm import HOST, SCONTROL_OUT, _executable


async def _two_passes(source):
    """The scontrol call runs beside the passes: its answer is read on the next one."""
    first = await source.collect()
    await asyncio.gather(source._gres_task, return_exceptions=True)
    return first, await source.collect()


async def test_a_job_is_named_on_a_gpu_it_holds_without_a_process(tmp_path, monkeypatch):
    monkeypatch.setattr("socket.gethostname", lambda: f"{HOST}.example.com")
    scontrol = _executable(tmp_path / "scontrol", SCONTROL_OUT)
    source, server, store = await _demo_source(tmp_path, scontrol=str(scontrol), endpoints=[])
    try:
        [first], [second] = await _two_passes(source)
    finally:
        await server.close()
        await source.close()
    assert second.partial_errors == []
    gpu = {(r[0], r[2], r[3], r[8]) for r in _rows(second.snapshot, "infrapulse_workload_gpu_info")
           if r[2] == "slurm_job"}
    # 4242 keeps its cgroup row (step 0) on GPU 0 and gets no second one; 4244 on idle GPU 2; 5000's
    # GRES on GPUs 5-6 beside 4243's processes there; 5001 (other nodes) and the MIG job are not here
    assert gpu == {("0", "slurm_job", "4242", "0"), ("2", "slurm_job", "4244", ""),
                   ("5", "slurm_job", "4243", "0"), ("6", "slurm_job", "4243", "0"),
                   ("7", "slurm_job", "4243", "0"), ("5", "slurm_job", "5000", ""),
                   ("6", "slurm_job", "5000", "")}
    assert ("2", "slurm_job", "4244", "") not in {(r[0], r[2], r[3], r[8]) for r in
                                                  _rows(first.snapshot, "infrapulse_workload_gpu_info")}
    assert second.snapshot.series["infrapulse_workload_gpus"][("idle",)] == 0.0
    coverage = store.status_of("workload", "workload").coverage
    assert coverage["slurm_gres"].series == 4  # GPU 0, 2, 5, 6


async def _second_pass_errors(tmp_path, scontrol: str) -> list[str]:
    source, server, _ = await _demo_source(tmp_path, scontrol=scontrol, endpoints=[])
    try:
        _, [result] = await _two_passes(source)
    finally:
        await server.close()
        await source.close()
    return result.partial_errors


async def test_a_failing_or_missing_scontrol_is_reported(tmp_path):
    failing = _executable(tmp_path / "scontrol", "", status=1)
    assert await _second_pass_errors(tmp_path, str(failing)) == [
        "scontrol: RuntimeError: exit status 1: slurm_load_jobs error: Unable to contact slurm controller"]
    missing = tmp_path / "no" / "scontrol"
    assert await _second_pass_errors(tmp_path, str(missing)) == [
        f"scontrol: FileNotFoundError: [Errno 2] No such file or directory: '{missing}'"]
