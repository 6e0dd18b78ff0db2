"""Processes behind a serving endpoint: the PID listening on its TCP port (/proc/net/tcp and tcp6,
the socket inode, then /proc/PID/fd) and that process's descendants (an engine's GPU workers are
its children: vLLM's EngineCore and workers, SGLang's schedulers)."""

from __future__ import annotations

import os
from pathlib import Path

LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column


def listening_inodes(proc_root: Path, port: int) -> set[str]:
    """Socket inodes listening on the port, any address, IPv4 or IPv6."""
    inodes = set()
    for name in ("tcp", "tcp6"):
        try:
            lines = (proc_root / "net" / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != LISTEN:
                continue
            local_port = fields[1].rsplit(":", 1)[-1]
            if int(local_port, 16) == port:
                inodes.add(fields[9])
    return inodes


def pids(proc_root: Path) -> list[int]:
    try:
        return [int(n) for n in os.listdir(proc_root) if n.isdigit()]
    except OSError:
        return []


def listening_pid(proc_root: Path, port: int, hint: int | None = None) -> int | None:
    """The process holding the listening socket: `hint` (the one found last time) while it still
    holds it, so a steady node reads one process's fd/ rather than every process's; else the
    lowest PID that does."""
    inodes = {f"socket:[{i}]" for i in listening_inodes(proc_root, port)}
    if not inodes:
        return None
    if hint is not None and _holds(proc_root, hint, inodes):
        return hint
    return next((pid for pid in sorted(pids(proc_root)) if _holds(proc_root, pid, inodes)), None)


def _holds(proc_root: Path, pid: int, inodes: set[str]) -> bool:
    fd_dir = proc_root / str(pid) / "fd"
    try:
        entries = os.listdir(fd_dir)
    except OSError:
        return False
    for fd in entries:
        try:
            if os.readlink(fd_dir / fd) in inodes:
                return True
        except OSError:
            continue
    return False


def parent_of(proc_root: Path, pid: int) -> int | None:
    try:
        stat = (proc_root / str(pid) / "stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[1])  # the comm may hold spaces and parentheses
    except (OSError, ValueError, IndexError):
        return None


def descends_from(proc_root: Path, pid: int, ancestor: int, depth: int = 32) -> bool:
    while depth and pid > 1:
        if pid == ancestor:
            return True
        parent = parent_of(proc_root, pid)
        if parent is None:
            return False
        pid, depth = parent, depth - 1
    return pid == ancestor
