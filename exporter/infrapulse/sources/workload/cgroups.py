"""Which workload a process belongs to, from its /proc/PID/cgroup line(s).

Slurm (slurmd's cgroup plugins, Slurm >= 22.05: src/plugins/cgroup/v2/cgroup_v2.c and
src/plugins/cgroup/v1/cgroup_v1.c in SchedMD/slurm):
  v2  0::/system.slice/slurmstepd.scope/job_<id>/step_<step>/user/task_<n>
      (`<nodename>_slurmstepd.scope` where several slurmd share a host; the step is a number or
      batch, extern, interactive)
  v1  <n>:<controller>:/slurm/uid_<uid>/job_<id>/step_<step>/task_<n>
      (`/slurm_<nodename>/...` with several slurmd)
Kubernetes (the kubelet's cgroup names, systemd and cgroupfs drivers):
      /kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid with _>.slice/cri-containerd-<id>.scope
      /kubepods/<qos>/pod<uid>/<container id>
Only the path is read: never the environment or the command line of a process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_SLURM_V2 = re.compile(r"/(?:[^/]+_)?slurmstepd\.scope/job_(?P<job>\d+)(?:/step_(?P<step>[A-Za-z0-9_]+))?")
_SLURM_V1 = re.compile(r"/slurm(?:_[^/]+)?/uid_(?P<uid>\d+)/job_(?P<job>\d+)"
                       r"(?:/step_(?P<step>[A-Za-z0-9_]+))?")
_POD = re.compile(r"kubepods.*?pod(?P<uid>[0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_]"
                  r"[0-9a-fA-F]{4}[-_][0-9a-fA-F]{12})")


@dataclass(frozen=True)
class ProcessCgroup:
    slurm_job_id: str = ""
    slurm_step: str = ""
    uid: int | None = None  # the job's owner where the path says it (v1), else the process's
    pod_uid: str = ""  # a Kubernetes pod's UID (its name comes from pod-resources, not from here)


def classify(text: str) -> ProcessCgroup:
    """The workload in /proc/PID/cgroup's text (every hierarchy's line; the first match wins)."""
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        if m := _SLURM_V2.search(path):
            return ProcessCgroup(m["job"], m["step"] or "")
        if m := _SLURM_V1.search(path):
            return ProcessCgroup(m["job"], m["step"] or "", int(m["uid"]))
        if m := _POD.search(path):
            return ProcessCgroup(pod_uid=m["uid"].replace("_", "-").lower())
    return ProcessCgroup()


def read_process(proc_root: Path, pid: int) -> ProcessCgroup | None:
    """The cgroup workload of a running process (None when it is gone), its uid filled from
    /proc/PID/status where the path does not carry one."""
    try:
        found = classify((proc_root / str(pid) / "cgroup").read_text())
    except OSError:
        return None
    if found.slurm_job_id and found.uid is None:
        uid = process_uid(proc_root, pid)
        if uid is not None:
            return ProcessCgroup(found.slurm_job_id, found.slurm_step, uid)
    return found


def process_uid(proc_root: Path, pid: int) -> int | None:
    try:
        for line in (proc_root / str(pid) / "status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])  # the real uid
    except (OSError, ValueError, IndexError):
        return None
    return None
