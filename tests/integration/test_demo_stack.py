"""`make demo`: the usual ports survive a quick restart, and the demo installs only what it needs."""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from demo_stack import free_port  # noqa: E402


def _port_in_time_wait() -> int:
    """A loopback port whose only socket is a closed connection in TIME_WAIT, as a demo that
    just stopped leaves behind (the side that closes first keeps TIME_WAIT on its port)."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    served, _ = listener.accept()
    served.close()  # the server closes first: TIME_WAIT on 127.0.0.1:<port>
    client.recv(1)  # its FIN reached the client
    client.close()
    listener.close()
    return port


def test_a_port_in_time_wait_is_still_the_demos_port():
    port = _port_in_time_wait()
    # What the old check did: a plain bind fails while the TIME_WAIT socket lasts ...
    with socket.socket() as plain, pytest.raises(OSError) as err:
        plain.bind(("127.0.0.1", port))
    assert err.value.errno == errno.EADDRINUSE
    # ... although the daemon, Prometheus and Alertmanager (SO_REUSEADDR) can listen there.
    assert free_port(port) == port


def test_a_port_someone_listens_on_is_not_free():
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        taken = busy.getsockname()[1]
        other = free_port(taken)
    assert other != taken and other > 0


def test_make_demo_installs_the_package_without_the_test_extras():
    recipe = subprocess.run(["make", "-n", "-B", "demo"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout
    installs = [line for line in recipe.splitlines() if "pip install" in line]
    assert installs and all(line.rstrip().endswith(" -e .") for line in installs), recipe
    assert "[test]" not in recipe and "scripts/demo.sh" in recipe
    # `make test` still installs the test extras
    recipe = subprocess.run(["make", "-n", "-B", "unit"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout
    assert "-e '.[test]'" in recipe
