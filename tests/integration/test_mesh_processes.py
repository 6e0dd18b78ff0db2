"""The `mesh` source against responder processes, the integration half of tests/test_mesh.py.

Several responder processes (`infrapulse simulate mesh`, the real responder code) on 127.0.0.x,
one with induced loss: exact sent/lost counts, RTT histogram per peer group, p99 per peer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from conftest import ROOT, stop_process
from infrapulse.sources.probe.mesh import TARGET
from infrapulse.store import Histogram
from test_mesh import mesh_config, running, sent_at_least, series, settle


@contextmanager
def responder_process(address: str, drop_every: int = 0) -> Iterator[tuple[subprocess.Popen[str], int]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "exporter")}
    proc = subprocess.Popen([sys.executable, "-m", "infrapulse", "simulate", "mesh", "--address", address,
                             "--drop-every", str(drop_every), "--seconds", "60"],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        started = json.loads(proc.stdout.readline())
        yield proc, started["responders"][0]["port"]
    finally:
        stop_process(proc)


def final_counts(proc: subprocess.Popen[str]) -> dict[str, dict[str, int]]:
    stop_process(proc)
    assert proc.stdout is not None
    return json.loads(proc.stdout.read().strip().splitlines()[-1])


PEER_IPS = (("gpu-node-02", "127.0.0.2"), ("gpu-node-03", "127.0.0.3"), ("gpu-node-04", "127.0.0.4"))


async def test_mesh_on_loopback_with_responder_processes_and_induced_loss() -> None:
    with responder_process("127.0.0.2") as (p2, port2), \
            responder_process("127.0.0.3", drop_every=4) as (p3, port3), \
            responder_process("127.0.0.4") as (p4, port4):
        config = mesh_config(switch="leaf01", peers=[
            {"name": "gpu-node-02", "address": "127.0.0.2", "port": port2, "switch": "leaf01"},
            {"name": "gpu-node-03", "address": "127.0.0.3", "port": port3, "switch": "leaf02"},
            {"name": "gpu-node-04", "address": "127.0.0.4", "port": port4}])
        async with running(config) as source:
            await sent_at_least(source, 40)  # ~2 s at 20 ms on an idle machine
            await settle(source)
            sent = series(source, "infrapulse_probe_mesh_sent_total")
            lost = series(source, "infrapulse_probe_mesh_lost_total")
            p99 = series(source, "infrapulse_probe_mesh_rtt_p99_seconds")
            rtt = series(source, "infrapulse_probe_mesh_rtt_seconds")
            probed = series(source, "infrapulse_probe_mesh_probed_peers")
            status = source.store.status[("mesh", TARGET)]
            untimed = {label: stats.untimed for label, stats in source.prober.stats.items()}
        counts = {ip: {"requests": c["requests"][ip], "dropped": c["dropped"][ip]}
                  for ip, c in (("127.0.0.2", final_counts(p2)), ("127.0.0.3", final_counts(p3)),
                                ("127.0.0.4", final_counts(p4)))}
    assert status.up and status.reason == "ok", status
    for name, ip in PEER_IPS:
        assert sent[(name,)] >= 40, sent
        assert sent[(name,)] == counts[ip]["requests"], f"{name}: every probe reached its responder"
        assert lost[(name,)] == counts[ip]["dropped"], f"{name}: lost = what the responder dropped"
    assert counts["127.0.0.3"]["dropped"] == counts["127.0.0.3"]["requests"] // 4 > 0
    assert lost[("gpu-node-02",)] == lost[("gpu-node-04",)] == 0
    assert set(p99) == {("gpu-node-02",), ("gpu-node-03",), ("gpu-node-04",)}
    assert all(0 < v < 0.05 for v in p99.values()), p99
    # Timed: answered, less those whose send (the prober's, or the responder's reply) the machine
    # held up past SEND_STALL_NS: a few when idle, half of them on a machine with CPU hogs.
    answered = {name: sent[(name,)] - lost[(name,)] - untimed[name] for name, _ in PEER_IPS}
    assert all(n > 0 for n in answered.values()), (answered, untimed)
    groups = {group: value for (group,), value in rtt.items()}
    assert isinstance(groups["same_switch"], Histogram)
    assert groups["same_switch"].count == answered["gpu-node-02"]
    assert groups["other_switch"].count == answered["gpu-node-03"]
    assert groups["unknown"].count == answered["gpu-node-04"]
    assert groups["same_switch"].buckets[-1] == (float("inf"), answered["gpu-node-02"])
    assert 0 < groups["same_switch"].sum < 0.05 * answered["gpu-node-02"]
    assert probed == {("same_switch",): 1.0, ("other_switch",): 1.0, ("unknown",): 1.0}
