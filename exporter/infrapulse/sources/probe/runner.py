"""Run one probe process safely: never two probes at once on a node, lowered CPU and I/O
priority, a hard timeout that kills the whole process group, output to a file.

Priority without races and without privileges: a short-lived thread lowers its own nice value
and I/O class (both are per-thread on Linux) and forks the probe, which inherits them; the
daemon's other threads keep theirs. The probe starts a new session, so a timeout (or the
daemon stopping) kills it and everything it started (an MPI launcher's ranks, a perftest
server) with one killpg.
"""

from __future__ import annotations

import asyncio
import ctypes
import fcntl
import logging
import os
import platform
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

log = logging.getLogger("infrapulse.source.probe")

# ioprio_set(2): syscall numbers, IOPRIO_WHO_PROCESS, and the idle class (runs only when no
# other process wants the disk).
_IOPRIO_SYSCALL = {"x86_64": 251, "aarch64": 30, "ppc64le": 273}
_IOPRIO_WHO_PROCESS = 1
_IOPRIO_CLASS_IDLE = 3
_IOPRIO_CLASS_SHIFT = 13
KILL_GRACE_SECONDS = 2.0


class ProbeBusy(Exception):
    """Another probe (this daemon's or another process's) holds the node's probe lock."""


@contextmanager
def probe_lock(path: Path) -> Iterator[None]:
    """An exclusive, non-blocking flock on `path`: one probe at a time per node, across processes
    (a second daemon, a Job started by hand that takes the same lock). Released by the kernel if
    the daemon dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ProbeBusy(f"another probe holds {path}") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def resolve(binary: str) -> str | None:
    """An executable path for `binary` (absolute, relative or looked up in PATH), or None."""
    if os.sep in binary:
        return binary if os.path.isfile(binary) and os.access(binary, os.X_OK) else None
    return shutil.which(binary)


def _lower_own_priority(nice: int, io_idle: bool) -> None:
    """Lower the calling thread's CPU and I/O priority (Linux: both are per thread)."""
    if nice > 0:
        try:
            current = os.getpriority(os.PRIO_PROCESS, 0)
            os.setpriority(os.PRIO_PROCESS, 0, min(current + nice, 19))
        except OSError as exc:
            log.debug("setpriority failed", extra={"error": str(exc)})
    number = _IOPRIO_SYSCALL.get(platform.machine())
    if io_idle and number is not None:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(number, _IOPRIO_WHO_PROCESS, 0, _IOPRIO_CLASS_IDLE << _IOPRIO_CLASS_SHIFT) != 0:
            log.debug("ioprio_set failed", extra={"errno": ctypes.get_errno()})


def spawn(argv: list[str], output: IO[bytes], env: dict[str, str], cwd: str, nice: int,
          io_idle: bool) -> subprocess.Popen[bytes]:
    """Start `argv` in a new session from a throw-away thread whose priority was lowered first."""
    box: list[subprocess.Popen[bytes] | BaseException] = []

    def start() -> None:
        try:
            _lower_own_priority(nice, io_idle)
            box.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=output,
                                        stderr=subprocess.STDOUT,
                                        env=env, cwd=cwd, start_new_session=True, close_fds=True))
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=start, name="probe-spawn", daemon=True)
    thread.start()
    thread.join()
    result = box[0]
    if isinstance(result, BaseException):
        raise result
    return result


def kill_group(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class Outcome:
    status: str  # "ok" (exit 0), "failed" (non-zero exit or could not start), "timeout"
    returncode: int | None
    output: str
    duration: float
    message: str = ""


class Process:
    """One started probe process whose output goes to `output_path`."""

    def __init__(self, argv: list[str], output_path: Path, env: dict[str, str], cwd: str,
                 nice: int, io_idle: bool) -> None:
        self.argv = argv
        self.output_path = output_path
        self.started = time.monotonic()
        with open(output_path, "wb") as out:
            self.proc = spawn(argv, out, env, cwd, nice, io_idle)

    def output(self) -> str:
        try:
            return self.output_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    async def wait(self, deadline: float) -> Outcome:
        """Wait until the process exits or the monotonic `deadline` passes; then kill its group
        (SIGTERM, then SIGKILL after a grace period)."""
        delay = 0.02
        while self.proc.poll() is None:
            if time.monotonic() >= deadline:
                await self.stop()
                limit = deadline - self.started
                return Outcome("timeout", None, self.output(), time.monotonic() - self.started,
                               f"{Path(self.argv[0]).name} did not finish within {limit:.0f}s; killed")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)
        kill_group(self.proc)  # whatever it left behind in its group
        code = self.proc.returncode
        status = "ok" if code == 0 else "failed"
        message = "" if code == 0 else f"{Path(self.argv[0]).name} exited with status {code}"
        return Outcome(status, code, self.output(), time.monotonic() - self.started, message)

    async def stop(self) -> None:
        if self.proc.poll() is None:
            kill_group(self.proc, signal.SIGTERM)
            grace = time.monotonic() + KILL_GRACE_SECONDS
            while self.proc.poll() is None and time.monotonic() < grace:
                await asyncio.sleep(0.05)
        kill_group(self.proc, signal.SIGKILL)
        if self.proc.poll() is None:
            await asyncio.to_thread(self.proc.wait)


async def run(argv: list[str], output_path: Path, timeout: float, env: dict[str, str], cwd: str,
              nice: int = 10, io_idle: bool = True) -> Outcome:
    """Run one probe to completion or its timeout. Cancellation kills it too."""
    try:
        process = Process(argv, output_path, env, cwd, nice, io_idle)
    except OSError as exc:
        return Outcome("failed", None, "", 0.0, f"cannot start {argv[0]}: {exc.strerror or exc}")
    try:
        return await process.wait(process.started + timeout)
    except asyncio.CancelledError:
        await asyncio.shield(process.stop())
        raise
