"""Slurm GRES allocations (issue 32): `scontrol show job --details --oneliner` names the GPUs a
running job holds on this node, so a job is named on a GPU where none of its processes runs. The
line shapes are Slurm 22.05's (as a real slurmctld on this machine prints them:
tests/e2e/test_slurm_real.py runs one); tests/integration/test_workload_slurm_scontrol.py runs the
source with a real executable in their place."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from infrapulse.sources.workload import slurm
from infrapulse.sources.workload.source import _scontrol

HOST = "gpu-node-01"
# Job 4244 holds GPU 2 and runs nothing there yet; 4242 also runs on GPU 0 (its cgroup names it,
# with its step); 5000 spans two nodes, GPUs 0-1 on each; 5001 is on other nodes only; 5002 is
# pending; 5003 holds a MIG instance (indexes MIG devices, not GPUs).
SCONTROL_OUT = "\n".join([
    "JobId=4242 JobName=train UserId=alice(1001) GroupId=alice(1001) MCS_label=N/A Priority=1 "
    "JobState=RUNNING Reason=None NodeList=gpu-node-01 NumNodes=1 TRES=cpu=8,gres/gpu=1 "
    "JOB_GRES=gpu:h100:1   Nodes=gpu-node-01 CPU_IDs=0-7 Mem=64000 GRES=gpu:h100:1(IDX:0) "
    "MinCPUsNode=1 Command=/home/alice/train.sh WorkDir=/home/alice/my runs TresPerNode=gres:gpu:1 ",
    "JobId=4244 JobName=eval UserId=bob(1002) GroupId=bob(1002) JobState=RUNNING Reason=None "
    "JOB_GRES=gpu:h100:1   Nodes=gpu-node-01 CPU_IDs=8 Mem=1000 GRES=gpu:h100:1(IDX:2) Command=sleep ",
    "JobId=5000 JobName=ddp UserId=carol(1003) JobState=RUNNING Reason=None JOB_GRES=gpu:4   "
    "Nodes=gpu-node-[01-02] CPU_IDs=0-3 Mem=0 GRES=gpu:2(IDX:5-6) Command=ddp ",
    "JobId=5001 JobName=other UserId=dave(1004) JobState=RUNNING Reason=None JOB_GRES=gpu:8   "
    "Nodes=gpu-node-[02-09] CPU_IDs=0-63 Mem=0 GRES=gpu:8(IDX:0-7) Command=x ",
    "JobId=5002 JobName=queued UserId=erin(1005) JobState=PENDING Reason=Resources NodeList= Command=y ",
    "JobId=5003 JobName=mig UserId=frank(1006) JobState=RUNNING Reason=None JOB_GRES=gpu:1g.10gb:1   "
    "Nodes=gpu-node-01 CPU_IDs=9 Mem=0 GRES=gpu:1g.10gb:1(IDX:3) Command=z ",
]) + "\n"


@pytest.mark.parametrize("hostlist, hosts", [
    ("gpu-node-01", ["gpu-node-01"]),
    ("gpu-node-[01-03,07]", ["gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-07"]),
    ("rack[1-2]-n[8-9],login1", ["rack1-n8", "rack1-n9", "rack2-n8", "rack2-n9", "login1"]),
    ("n[098-101]", ["n098", "n099", "n100", "n101"]),
    ("odd[a-b]", ["odd[a-b]"]),
])
def test_slurm_hostlists_expand(hostlist, hosts):
    assert slurm.expand_hostlist(hostlist) == hosts


@pytest.mark.parametrize("gres, indexes", [
    ("gpu:h100:1(IDX:0)", ["0"]),
    ("gpu:2(IDX:0,2-3)", ["0", "2", "3"]),
    ("gpu:a100:2(IDX:4-5),nic:1(IDX:0)", ["4", "5"]),
    ("gpu(IDX:1)", ["1"]),  # Slurm before 20.02: GRES_IDX=gpu(IDX:1)
    ("gpu:1g.10gb:1(IDX:3)", []),  # a MIG device index, not a GPU
    ("gpu:1(IDX:N/A)", []),
    ("", []),
])
def test_gpu_indexes_from_a_gres_string(gres, indexes):
    assert slurm.gpu_indexes(gres) == indexes


def test_parse_jobs_keeps_the_running_jobs_holding_gpus_on_this_node():
    jobs = slurm.parse_jobs(SCONTROL_OUT, HOST)
    assert jobs == [slurm.GresAllocation("4242", 1001, ("0",)), slurm.GresAllocation("4244", 1002, ("2",)),
                    slurm.GresAllocation("5000", 1003, ("5", "6"))]
    assert [j.job_id for j in slurm.parse_jobs(SCONTROL_OUT, "gpu-node-05")] == ["5001"]
    assert slurm.parse_jobs("No jobs in the system\n", HOST) == []


def _executable(path: Path, text: str, status: int = 0) -> Path:
    out = path.with_suffix(".out")
    out.write_text(text)
    path.write_text(f"#!/bin/sh\n[ \"$*\" = 'show job --details --oneliner' ] || exit 9\ncat {out}\n"
                    f"echo 'slurm_load_jobs error: Unable to contact slurm controller' >&2\nexit {status}\n"
                    if status else f"#!/bin/sh\n[ \"$*\" = 'show job --details --oneliner' ] || exit 9\n"
                    f"cat {out}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_auto_reads_scontrol_only_where_slurmd_runs(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _executable(bin_dir / "scontrol", "")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    proc = tmp_path / "proc"
    (proc / "41").mkdir(parents=True)
    (proc / "41" / "comm").write_text("sshd\n")
    assert _scontrol("auto", proc) == ""
    (proc / "42").mkdir()
    (proc / "42" / "comm").write_text("slurmd\n")
    assert _scontrol("auto", proc) == str(bin_dir / "scontrol")
    assert _scontrol("", proc) == ""
    assert _scontrol("/opt/slurm/bin/scontrol", proc) == "/opt/slurm/bin/scontrol"
