"""Walk a quickstart (docs/quickstart-*.md) the way a reader does, against simulated hardware.

The walk reads the fenced blocks in order:

* a `yaml` block whose first line is `# file: PATH` is written to PATH;
* a `yaml` block whose first line is `# prometheus.yml, under scrape_configs:` becomes the only
  job of a prometheus.yml at /etc/prometheus/prometheus.yml (with `rule_files: [rules/*]`);
* every line of an `sh` block is a command, run with bash from the repository root;
  `infrapulse run ...` starts the daemon in the background and waits until it serves;
* a `text` block is the output the command before it prints: its lines must appear in that
  order in the real output (whitespace-insensitive; a line `...` skips any number of lines).

Paths, ports and addresses go through `forward` substitutions (doc -> simulation) before a
command runs or a file is written, and the output through `backward` ones (simulation -> doc)
before it is compared, so the doc shows the paths a reader has. Commands the walk cannot run
(cloning, installing, restarting system services) are listed by the test; every other command
must exit 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
SCRAPE_JOB_MARK = "# prometheus.yml, under scrape_configs:"


@dataclass
class Block:
    kind: str
    body: str


def blocks(markdown: str) -> list[Block]:
    return [Block(m.group(1), m.group(2)) for m in FENCE.finditer(markdown)]


def commands(body: str) -> list[str]:
    """The commands of an sh block: comments and blank lines dropped, `\\` continuations joined."""
    out: list[str] = []
    pending = ""
    for line in body.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((pending + line).strip())
        pending = ""
    return out


def _words(line: str) -> list[str]:
    return line.split()


def expect_in_order(expected: str, output: str) -> None:
    """Each expected line appears in the output after the previous one; `...` skips lines."""
    lines = [_words(line) for line in output.splitlines()]
    pos = 0
    for want in expected.splitlines():
        if not want.strip() or want.strip() == "...":
            continue
        words = _words(want)
        while pos < len(lines) and lines[pos] != words:
            pos += 1
        if pos == len(lines):
            raise AssertionError(f"expected line not found (in order):\n  {want}\noutput:\n{output}")
        pos += 1


@dataclass
class Walk:
    tmp: Path
    port: int
    forward: list[tuple[str, str]]
    backward: list[tuple[str, str]]  # (regex, replacement)
    skip: set[str]
    env: dict[str, str] = field(default_factory=dict)
    adapt_file: Callable[[Path], None] = lambda path: None
    tolerate_exit: tuple[str, ...] = ("infrapulse score",)  # its exit code is the health status
    skipped: list[str] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    transcript: list[str] = field(default_factory=list)  # kept as tmp/transcript.txt
    daemon: asyncio.subprocess.Process | None = None

    def fwd(self, text: str) -> str:
        for old, new in self.forward:
            text = text.replace(old, new)
        return text

    def back(self, text: str) -> str:
        for pattern, replacement in self.backward:
            text = re.sub(pattern, replacement, text)
        return text

    def _environment(self) -> dict[str, str]:
        shim = self.tmp / "bin"
        shim.mkdir(exist_ok=True)
        script = shim / "infrapulse"
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m infrapulse "$@"\n')
        script.chmod(0o755)
        return {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}",
                "PYTHONPATH": str(ROOT / "exporter"), **self.env}

    async def run(self, markdown: str) -> None:
        env = self._environment()
        last_output: str | None = None
        try:
            for block in blocks(markdown):
                if block.kind == "yaml" and block.body.startswith("# file: "):
                    path = Path(self.fwd(block.body.splitlines()[0][len("# file: "):].strip()))
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(self.fwd(block.body))
                    self.adapt_file(path)
                elif block.kind == "yaml" and block.body.startswith(SCRAPE_JOB_MARK):
                    self._write_prometheus_yml(block.body)
                elif block.kind == "sh":
                    for command in commands(block.body):
                        last_output = await self._command(command, env)
                elif block.kind == "text":
                    assert last_output is not None, "a text block before any command"
                    expect_in_order(block.body, self.back(last_output))
        finally:
            await self.stop()
            (self.tmp / "transcript.txt").write_text("\n".join(self.transcript))

    def _write_prometheus_yml(self, job: str) -> None:
        path = Path(self.fwd("/etc/prometheus/prometheus.yml"))
        path.parent.mkdir(parents=True, exist_ok=True)
        indented = "".join(f"  {line}\n" for line in job.splitlines())
        path.write_text(f'rule_files: ["rules/*.rules.yaml"]\nscrape_configs:\n{indented}')

    async def _command(self, command: str, env: dict[str, str]) -> str:
        if command in self.skip:
            self.skipped.append(command)
            self.transcript.append(f"$ {command}\n(not run by the test)")
            return ""
        real = self.fwd(command)
        self.ran.append(command)
        if command.startswith("infrapulse run "):
            await self._start_daemon(real, env)
            return ""
        proc = await asyncio.create_subprocess_exec(
            "bash", "-o", "pipefail", "-c", real, cwd=ROOT, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await asyncio.wait_for(proc.communicate(), 90)
        text = out.decode()
        self.transcript.append(f"$ {command}\n{self.back(text)}")
        allowed = (0, 1, 2, 3) if command.startswith(self.tolerate_exit) else (0,)
        assert proc.returncode in allowed, f"{command}\n(run as: {real})\nexit {proc.returncode}:\n{text}"
        return text

    async def _start_daemon(self, command: str, env: dict[str, str]) -> None:
        log = open(self.tmp / "daemon.log", "wb")  # noqa: SIM115 - closed with the process
        self.daemon = await asyncio.create_subprocess_exec(
            "bash", "-c", f"exec {command}", cwd=ROOT, env=env, stdout=log, stderr=log)
        url = f"http://127.0.0.1:{self.port}/api/v1/sources"
        deadline = asyncio.get_running_loop().time() + 45
        while True:
            assert self.daemon.returncode is None, (self.tmp / "daemon.log").read_text()
            try:
                body = await asyncio.to_thread(_get_json, url)
                # Served, and every source instance has reported at least once.
                if body["sources"] and all(s["up"] for s in body["sources"]):
                    return
            except OSError:
                pass
            if asyncio.get_running_loop().time() > deadline:
                return  # the commands that follow show what is missing
            await asyncio.sleep(0.3)

    async def stop(self) -> None:
        if self.daemon is not None and self.daemon.returncode is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.daemon.wait(), 15)
            except asyncio.TimeoutError:
                self.daemon.kill()
                await self.daemon.wait()


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback test URL
        return json.loads(response.read())
