"""Slurm GRES allocations from `scontrol show job -d --oneliner`: the GPU indexes each running job
holds on this node, so a job that holds a GPU without running a process on it (a data loader
still starting, a rank that crashed and left its allocation) is still named.

The detail entries look like this (Slurm 22.05, read from a real slurmctld in
tests/e2e/test_slurm_real.py; Slurm before 20.02 wrote `GRES_IDX=gpu:h100(IDX:0-1)` instead):

    JobId=17 JobName=train UserId=alice(1000) ... JobState=RUNNING ...
      Nodes=gpu-node-[01-02] CPU_IDs=0-7 Mem=64000 GRES=gpu:h100:2(IDX:0-1)

`Nodes=` is a Slurm hostlist; `IDX` counts the node's GPU GRES in gres.conf order, which is the
/dev/nvidiaN order for `File=/dev/nvidia[0-7]` and for AutoDetect=nvml, and so NVML's index where
NVML enumerates in PCI bus order (the default). MIG GRES (types such as `1g.10gb`) index MIG
devices, not GPUs, and are left to the cgroup path (attribution through the job's processes).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import dataclass

from ...deadline import within

SCONTROL_ARGS = ("show", "job", "--details", "--oneliner")
_JOB = re.compile(r"(?:^|\s)JobId=(\d+)\s")
_STATE = re.compile(r"\sJobState=(\S+)")
_UID = re.compile(r"\sUserId=[^\s(]*\((\d+)\)")
_DETAIL = re.compile(r"\sNodes=(\S+)\s+CPU_IDs=\S*\s+Mem=\S*\s+GRES(?:_IDX)?=(\S*)")
_GRES = re.compile(r"^(?P<name>[^:(]+)(?::(?P<type>[^:(]+))?(?::\d+)?\(IDX:(?P<idx>[^)]*)\)$")
_MIG_TYPE = re.compile(r"^\d+g\.\d+gb$")


@dataclass(frozen=True)
class GresAllocation:
    """One running job's GPU indexes on this node."""

    job_id: str
    uid: int | None
    gpus: tuple[str, ...]


def expand_hostlist(hostlist: str) -> list[str]:
    """`gpu-node-[01-03,07],login1` -> the host names, zero padding kept (Slurm's hostlist form)."""
    out: list[str] = []
    for item in _split_outside(hostlist, "[", "]"):
        out += _expand_one(item)
    return out


def _expand_one(item: str) -> list[str]:
    m = re.search(r"\[([^\]]*)\]", item)
    if m is None:
        return [item] if item else []
    head, tail = item[:m.start()], item[m.end():]
    names = []
    for part in m.group(1).split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return [item]  # not a hostlist range: the name as written
        width = len(lo)
        for n in range(int(lo), int(hi or lo) + 1):
            names += [head + str(n).zfill(width) + rest for rest in _expand_one(tail) or [""]]
    return names


def _split_outside(text: str, opening: str, closing: str) -> Iterator[str]:
    """Split at commas that are not inside opening ... closing."""
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == opening:
            depth += 1
        elif ch == closing:
            depth -= 1
        elif ch == "," and depth == 0:
            yield text[start:i]
            start = i + 1
    yield text[start:]


def gpu_indexes(gres: str) -> list[str]:
    """`gpu:h100:2(IDX:0,2-3),nic:1(IDX:0)` -> ["0", "2", "3"]: the GPU (not MIG) indexes."""
    out: list[str] = []
    for item in _split_outside(gres, "(", ")"):
        m = _GRES.match(item.strip())
        if m is None or m["name"] != "gpu" or (m["type"] and _MIG_TYPE.match(m["type"])):
            continue
        for part in m["idx"].split(","):
            lo, _, hi = part.partition("-")
            if lo.isdigit() and (not hi or hi.isdigit()):
                out += [str(n) for n in range(int(lo), int(hi or lo) + 1)]
    return out


def parse_jobs(text: str, node: str) -> list[GresAllocation]:
    """The running jobs holding GPUs on `node`, from `scontrol show job -d --oneliner` (one job per
    line). Jobs in other states, on other nodes or without GPU GRES are left out."""
    out = []
    for line in text.splitlines():
        job, state = _JOB.search(" " + line), _STATE.search(line)
        if job is None or state is None or state.group(1) != "RUNNING":
            continue
        gpus: list[str] = []
        for m in _DETAIL.finditer(line):
            if node in expand_hostlist(m.group(1)):
                gpus += gpu_indexes(m.group(2))
        if gpus:
            uid = _UID.search(line)
            out.append(GresAllocation(job.group(1), int(uid.group(1)) if uid else None,
                                      tuple(sorted(set(gpus), key=int))))
    return out


async def read_allocations(scontrol: str, node: str, timeout: float) -> list[GresAllocation]:
    """Run scontrol once; raises OSError, asyncio.TimeoutError or RuntimeError (its exit status and
    stderr)."""
    proc = await asyncio.create_subprocess_exec(scontrol, *SCONTROL_ARGS, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await within(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    if proc.returncode != 0:
        message = err.decode(errors="replace").strip().splitlines()
        raise RuntimeError(f"exit status {proc.returncode}: {message[-1] if message else 'no message'}")
    return parse_jobs(out.decode(errors="replace"), node)
