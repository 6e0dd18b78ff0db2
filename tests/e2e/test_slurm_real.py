"""A real Slurm on localhost (issue 32): munged, slurmctld and slurmd from Debian's slurm-wlm
22.05 with proctrack/cgroup, a real `srun sleep` job, and the workload source attributing the
GPU that job's process runs on (the NVML fake lists the real PID; /proc is the real one) to that
job and step, read from the cgroup path slurmd itself created."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from conftest import free_port
from helpers import wait_until
from infrapulse import config as config_mod
from infrapulse.simulate.nvml_fake import DEFAULT_DATA, open_fake
from infrapulse.sources.base import SourceContext
from infrapulse.sources.workload import slurm as slurm_mod
from infrapulse.sources.workload.cgroups import read_process
from infrapulse.sources.workload.source import OPEN_FAKE_KEY, WorkloadSource
from infrapulse.store import Store

SBIN = {name: shutil.which(name) or f"/usr/sbin/{name}" for name in ("munged", "slurmctld", "slurmd")}
BIN = {name: shutil.which(name) or f"/usr/bin/{name}" for name in ("srun", "sinfo", "scancel", "scontrol")}


def _wait(predicate, timeout: float, what: str):
    return wait_until(predicate, timeout, what, every=0.2)


@pytest.fixture
def slurm(tmp_path: Path) -> Iterator[dict[str, str]]:
    assert os.geteuid() == 0, "slurmd's proctrack/cgroup needs root (make test runs as root in CI)"
    host = socket.gethostname().split(".")[0]
    munge = tmp_path / "munge"
    munge.mkdir()
    key = munge / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    sock = munge / "munge.socket"
    conf = tmp_path / "slurm.conf"
    spool = tmp_path / "spool"
    (spool / "ctld").mkdir(parents=True)
    (spool / "d").mkdir()
    # two ports, distinct: a port closed by one free_port() call can be the next call's answer
    ctld_port = free_port()
    slurmd_port = next(p for p in iter(free_port, None) if p != ctld_port)
    conf.write_text(f"""ClusterName=infrapulse-test
SlurmctldHost={host}
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={sock}
ProctrackType=proctrack/cgroup
TaskPlugin=task/none
SlurmUser=root
StateSaveLocation={spool / 'ctld'}
SlurmdSpoolDir={spool / 'd'}
SlurmctldPidFile={tmp_path / 'slurmctld.pid'}
SlurmdPidFile={tmp_path / 'slurmd.pid'}
SelectType=select/cons_tres
GresTypes=gpu
MpiDefault=none
ReturnToService=2
NodeName={host} CPUs={os.cpu_count() or 1} Gres=gpu:h100:4 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
    # Four GPU GRES on stand-in device files (slurmd only stats them; no device cgroup here)
    devices = tmp_path / "dev"
    devices.mkdir()
    for i in range(4):
        (devices / f"nvidia{i}").touch()
    (tmp_path / "gres.conf").write_text(f"NodeName={host} Name=gpu Type=h100 File={devices}/nvidia[0-3]\n")
    (tmp_path / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\nConstrainCores=no\nConstrainRAMSpace=no\n"
                                          "ConstrainDevices=no\n" if Path("/sys/fs/cgroup/freezer").is_dir()
                                          else "CgroupPlugin=cgroup/v2\nConstrainDevices=no\n")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    logs = {name: open(tmp_path / f"{name}.log", "wb") for name in ("munged", "slurmctld", "slurmd")}  # noqa: SIM115
    procs = [subprocess.Popen([SBIN["munged"], "-F", "--force", f"--key-file={key}", f"--socket={sock}",
                               f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}",
                               f"--seed-file={munge / 'munged.seed'}"], stdout=logs["munged"],
                              stderr=subprocess.STDOUT)]
    try:
        _wait(sock.exists, 20, "munged's socket")
        procs.append(subprocess.Popen([SBIN["slurmctld"], "-D", "-i"], env=env, stdout=logs["slurmctld"],
                                      stderr=subprocess.STDOUT))
        procs.append(subprocess.Popen([SBIN["slurmd"], "-D"], env=env, stdout=logs["slurmd"],
                                      stderr=subprocess.STDOUT))

        def idle() -> bool:
            out = subprocess.run([BIN["sinfo"], "-h", "-o", "%t"], env=env, capture_output=True, text=True)
            return out.stdout.strip() in ("idle", "mix", "alloc")
        _wait(idle, 60, f"the Slurm node to be idle (logs in {tmp_path})")
        yield env
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in logs.values():
            log.close()


def _child_of(pid: int, comm: str) -> int | None:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if stat.split(") ", 1)[0].endswith(f"({comm}") and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            return int(entry)
    return None


def _stepds() -> set[int]:
    """PIDs of the running slurmstepd processes."""
    found = set()
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"slurmstepd: ["):
                found.add(int(p))
        except OSError:
            continue
    return found


async def test_a_real_srun_job_is_attributed_through_its_cgroup(slurm, tmp_path):
    # A slurmstepd this job did not start (one orphaned by an earlier run on this machine) has no
    # sleep of ours below it: only a new one is this job's step.
    before = _stepds()
    job = subprocess.Popen([BIN["srun"], "-N1", "-n1", "--job-name=infrapulse-e2e", "sleep", "300"],
                           env=slurm, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        stepd = _wait(lambda: min(_stepds() - before, default=None), 30, "slurmstepd")
        sleep_pid = _wait(lambda: _child_of(stepd, "sleep"), 30, "the job's sleep")
        found = read_process(Path("/proc"), sleep_pid)
        assert found is not None and found.slurm_job_id.isdigit() and found.slurm_step == "0", \
            Path(f"/proc/{sleep_pid}/cgroup").read_text()
        # The source, end to end: GPU 0 of the NVML fake runs that real PID.
        spec = yaml.safe_load(DEFAULT_DATA.read_text())
        spec["gpus"][0]["processes"] = [sleep_pid]
        (tmp_path / "gpus.yaml").write_text(yaml.safe_dump(spec))
        section = {"enabled": True, "nvml_fake": str(tmp_path / "gpus.yaml"), "pod_resources_socket": "",
                   "proc_root": "/proc", "sysfs_root": str(tmp_path / "no-sysfs"), "scontrol": ""}
        cfg = config_mod.load_text(yaml.safe_dump({"sources": {"workload": section}}), "<slurm e2e>")
        ctx = SourceContext(store=Store(), interval=5.0, options={OPEN_FAKE_KEY: open_fake})
        source = WorkloadSource(cfg.sources["workload"], ctx)
        try:
            [result] = await source.collect()
        finally:
            await source.close()
        rows = set(result.snapshot.series["infrapulse_workload_gpu_info"])
        assert {(r[0], r[2], r[3], r[7], r[8]) for r in rows} == {
            ("0", "slurm_job", found.slurm_job_id, found.slurm_job_id, "0")}
    finally:
        subprocess.run([BIN["scancel"], "--name=infrapulse-e2e"], env=slurm, capture_output=True)
        job.terminate()
        job.wait(timeout=20)


async def test_a_real_job_holding_a_gpu_is_named_through_its_gres(slurm, tmp_path, monkeypatch):
    """A job that holds a GPU and runs nothing on it (no process of its on any GPU): scontrol's
    GRES IDX names it on that GPU, read from the real slurmctld."""
    job = subprocess.Popen([BIN["srun"], "-N1", "-n1", "--gres=gpu:h100:2", "--job-name=infrapulse-gres",
                            "sleep", "300"], env=slurm, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        def running() -> str | None:
            out = subprocess.run([BIN["scontrol"], *slurm_mod.SCONTROL_ARGS], env=slurm, capture_output=True,
                                 text=True).stdout
            return out if "JobName=infrapulse-gres" in out and "JobState=RUNNING" in out else None
        text = _wait(running, 30, "the GRES job to run")
        host = socket.gethostname().split(".")[0]
        [allocation] = slurm_mod.parse_jobs(text, host)
        assert allocation.gpus == ("0", "1") and allocation.uid == 0, text
        monkeypatch.setenv("SLURM_CONF", slurm["SLURM_CONF"])
        section = {"enabled": True, "nvml_fake": str(DEFAULT_DATA), "pod_resources_socket": "",
                   "proc_root": str(tmp_path / "no-proc"), "sysfs_root": str(tmp_path / "no-sysfs"),
                   "scontrol": BIN["scontrol"], "slurm_node_name": host}
        cfg = config_mod.load_text(yaml.safe_dump({"sources": {"workload": section}}), "<slurm e2e>")
        source = WorkloadSource(cfg.sources["workload"], SourceContext(
            store=Store(), interval=5.0, options={OPEN_FAKE_KEY: open_fake}))
        try:
            await source.collect()
            await asyncio.gather(source._gres_task, return_exceptions=True)
            [result] = await source.collect()
        finally:
            await source.close()
        assert result.partial_errors == []
        rows = {(r[0], r[2], r[3]) for r in result.snapshot.series["infrapulse_workload_gpu_info"]}
        assert rows == {("0", "slurm_job", allocation.job_id), ("1", "slurm_job", allocation.job_id)}
    finally:
        subprocess.run([BIN["scancel"], "--name=infrapulse-gres"], env=slurm, capture_output=True)
        job.terminate()
        job.wait(timeout=20)
