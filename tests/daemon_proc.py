"""Run `infrapulse` as a real subprocess on a free port, for tests that need signals."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

from conftest import free_port, stop_process


class DaemonProcess:
    def __init__(self, args: list[str], port: int | None = None, env: dict | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "infrapulse", *args, "--listen", f"127.0.0.1:{self.port}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, **(env or {})},
        )

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.proc.returncode}: {self.proc.stdout.read()}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise TimeoutError("daemon did not become ready")

    def get(self, path: str, headers: dict | None = None) -> tuple[bytes, dict]:
        req = urllib.request.Request(self.url + path, headers=headers or {})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.read(), dict(resp.headers)

    def metrics(self) -> str:
        return self.get("/metrics")[0].decode()

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def stop(self) -> str:
        stop_process(self.proc, timeout=5)
        return self.proc.stdout.read() if self.proc.stdout else ""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
