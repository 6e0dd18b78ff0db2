#!/usr/bin/env python3
"""Health pass cost: CPU seconds of one `HealthService.tick()` per 100k series, and the memory the
health state keeps per series, on a fabric-sized store and on a node-sized one.

The fabric store is filled the way the gNMI source fills it: one `SwitchState` per switch (the
source's own ingest and columns), fed the serialized SubscribeResponses of the project's gNMI
simulator (`SimSwitch`, nvidia-cumulus, PROTO: the daemon's own Subscribe requests answered by the
simulator's renderer, one notification per list entry as the Cumulus capture has them), its
snapshot published into a `Store`. Two sizes (default 16 and 32 switches x 64 ports) give the
slope. The node store holds what a node instance scores: 8 mlx5 devices' RDMA and
NIC counters, 8 GPUs.

Each pass advances simulated time by `--interval` (the health interval) and every counter slot
by a varying amount first (a few counters reset), so no rate cache can answer from a previous
pass, as in production. Before the measured passes, enough passes run to fill every window
(event_window / interval + 2), so the rings are at their steady size.

Measured: CPU (time.process_time) per pass, median of `--passes`, the cyclic GC left on as in the
daemon (whatever it costs inside a pass is the pass's); the cyclic GC's CPU over the whole measured
loop, wherever it ran (gc.callbacks: a pass that defers collections must not hide them); retained
memory of the health state (tracemalloc: what the service holds after the warm-up passes, after
GC) per series; a digest of every pass's report (report_json).

`--before REF` measures the tree of git commit REF and this tree, each in its own child process
(git archive into a temporary folder, same bench code), alternated ABBA over `--rounds` rounds
(this, REF, REF, this, ...): the machine's speed drifts within a run, and on a shared 2-vCPU VM
the tree measured second was faster in most runs of the one-shot order. It prints the median of
the rounds for each tree side by side, every round's figure, and whether the two trees' reports
were identical pass for pass.

Run: PYTHONPATH=exporter .venv/bin/python bench/health_pass.py [--switches 32 64]
     [--before 635d75d [--rounds 2]]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import tracemalloc
from array import array
from pathlib import Path
from typing import Any

PORTS = 64
PROFILE = "nvidia-cumulus"
HEALTH = {"window": 60.0, "event_window": 300.0}  # seconds: replaced into the default `health:` settings


# -- the stores ---------------------------------------------------------------------------------


def report_bytes(service: Any) -> bytes:
    """The pass's report as canonical JSON, for the digest the two trees are compared by."""
    from infrapulse.health.scoring import report_json

    assert service.report is not None, "a pass ran: the service has a report"
    return json.dumps(report_json(service.report), sort_keys=True).encode()


def switch_messages(name: str, ports: int) -> list[bytes]:
    """One full sample of one simulated switch as serialized SubscribeResponses: the daemon's own
    Subscribe requests for the profile, each answered by the simulator's renderer (the code its
    gRPC server streams), so the notifications have the shape a real switch sends (Cumulus 5.16:
    one per list entry, the leaves relative to it) and the decoded prefixes cost what they cost
    live."""
    from pygnmi.spec.v080 import gnmi_pb2 as pb

    from infrapulse.simulate.gnmi_target import Renderer, SimSwitch
    from infrapulse.sources.gnmi.profile import load_profiles
    from infrapulse.sources.gnmi.session import subscribe_request

    neighbors = {i: (f"node{i:03d}", "eth0") for i in range(0, ports, 2)}
    switch = SimSwitch(name, PROFILE, ports=ports, neighbors=neighbors, frozen=True)
    out: list[bytes] = []
    for stream in load_profiles()[PROFILE].streams:
        sl = subscribe_request(stream, "proto", 10.0).subscribe
        prefix = pb.Path(origin=sl.prefix.origin, target=sl.prefix.target)
        for sub in sl.subscription:
            notes, _state = Renderer(switch, prefix, sub, sl.encoding).render()
            out.extend(pb.SubscribeResponse(update=n).SerializeToString() for n in notes)
    return out


# Increments per pass by family-name fragment (first match wins): a healthy fabric under load.
STEPS: tuple[tuple[str, tuple[float, ...]], ...] = (
    ("ecn_marked", (0.0, 1.0, 3.0, 20.0)),
    ("transmitted_packets", (0.0, 1e5, 4e5)),
    ("_bytes_total", (1e8, 4e8)),
    ("pfc_pause_frames", (0.0, 0.0, 1.0, 2.0)),
    ("pfc_pause_duration", (0.0, 0.0, 0.000134, 0.000268)),
    ("occupancy", (0.0, 1000.0, -1000.0)),
    ("depth_bytes", (0.0, 1000.0, -1000.0)),
    ("errors", (0.0, 0.0, 0.0, 1.0)),
    ("discards", (0.0, 0.0, 0.0, 1.0)),
)


class Fabric:
    """`switches` SwitchStates in one store, their counters advanced in place between passes."""

    def __init__(self, switches: int, ports: int = PORTS, seed: int = 1) -> None:
        from infrapulse.sources.gnmi import wire
        from infrapulse.sources.gnmi.ingest import SwitchState
        from infrapulse.sources.gnmi.profile import load_profiles
        from infrapulse.store import Store

        self.store = Store()
        self.states = []
        profile = load_profiles()[PROFILE]
        for i in range(switches):
            name = f"leaf{i:02d}"
            state = SwitchState(name, profile, max_series=10**7)
            for m in switch_messages(name, ports):
                state.apply_wire(wire.SubscribeResponse.FromString(m).update, m)
            state.set_up(True)
            self.states.append(state)
            self.store.publish("gnmi", name, state.snapshot, stale_after=float("inf"))
        self.rng = random.Random(seed)
        self.steps = [self._steps(s) for s in self.states]

    def _steps(self, state: Any) -> array:
        """Per-slot increments of a healthy, busy fabric: packets and bytes move, a few ECN marks
        and pause frames, errors and drops mostly stay put."""
        from infrapulse.columns import Column

        steps = array("d", bytes(8 * len(state.slots.values)))
        for family, series in state.snapshot.series.items():
            if not isinstance(series, Column):
                continue
            choices = next((c for word, c in STEPS if word in family), (0.0,))
            for slot in series.index.values():
                steps[slot] = self.rng.choice(choices)
        return steps

    def advance(self, now: float) -> None:
        for state, steps in zip(self.states, self.steps):
            values = state.slots.values
            values[:] = array("d", map(float.__add__, values, steps))
            if self.rng.random() < 0.2:  # a counter reset somewhere
                values[self.rng.randrange(len(values))] = 0.0
            state.snapshot.timestamp = now


class Node:
    """A node instance's counters: 8 RDMA ports (infiniband), 8 NICs (ethtool), 8 GPUs."""

    def __init__(self) -> None:
        from infrapulse import catalog
        from infrapulse.health.signals import counters_by_window
        from infrapulse.store import Snapshot, Store

        self.store = Store()
        families = {f for fams in counters_by_window().values() for f in fams
                    if not f.startswith("infrapulse_switch_")}
        fill = {"device": [f"mlx5_{i}" for i in range(8)], "port": ["1"],
                "interface": [f"eth{i}" for i in range(8)], "priority": [str(p) for p in range(8)],
                "direction": ["rx", "tx"], "gpu": [str(g) for g in range(8)]}
        self.snapshots: dict[str, Any] = {}
        for source in ("infiniband", "ethtool", "nvml"):
            self.snapshots[source] = Snapshot(0.0)
        for family in sorted(families):
            source = ("nvml" if "_gpu_" in family else "infiniband" if "_rdma_" in family else "ethtool")
            labels = catalog.get(family).labels
            combos: list[tuple[str, ...]] = [()]
            for label in labels:
                combos = [c + (v,) for c in combos for v in fill.get(label, ["a", "b"])]
            for combo in combos:
                self.snapshots[source].add(family, combo, 0.0)
        for source, snap in self.snapshots.items():
            self.store.publish(source, "localhost", snap, stale_after=float("inf"))
        self.rng = random.Random(2)

    def advance(self, now: float) -> None:
        for snap in self.snapshots.values():
            for series in snap.series.values():
                for key in series:
                    series[key] += self.rng.choice((0.0, 1.0, 100.0, 1e6))
            snap.timestamp = now


# -- the measurement ----------------------------------------------------------------------------


def measure(world: Any, passes: int, interval: float) -> dict[str, float]:
    from infrapulse.config import default_config
    from infrapulse.health.service import HealthService

    health = dataclasses.replace(default_config().health, **HEALTH)
    series = world.store.series_count()
    now = 1.8e9  # simulated time, the same in every run: the reports can be compared across trees
    digest = hashlib.sha256()
    tracemalloc.start()
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    service = HealthService(world.store, health, "node000", interval)
    warm = int(health.event_window / interval) + 2
    for _ in range(warm):
        now += interval
        world.advance(now)
        service.tick(now)
        digest.update(report_bytes(service))
    gc.collect()
    retained = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    cpu = []
    in_gc = [0.0, 0.0]  # CPU in the cyclic GC over the measured loop, wherever it ran

    def gc_clock(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            in_gc[1] = time.process_time()
        else:
            in_gc[0] += time.process_time() - in_gc[1]

    gc.callbacks.append(gc_clock)
    for _ in range(passes):  # the GC runs as it would in the daemon: its cost is the pass's
        now += interval
        world.advance(now)
        started = time.process_time()
        service.tick(now)
        cpu.append(time.process_time() - started)
        digest.update(report_bytes(service))
    gc.callbacks.remove(gc_clock)
    report = service.report
    return {"gc_per_pass": in_gc[0] / passes,"series": series, "cpu_per_pass": statistics.median(cpu),
            "cpu_per_100k": statistics.median(cpu) / series * 1e5,
            "retained_bytes_per_series": retained / series,
            "score": report.score if report is not None else -1.0, "reports": digest.hexdigest()[:16]}


def run_here(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in args.switches:
        out[f"fabric {n}x{PORTS}"] = measure(Fabric(n), args.passes, args.interval)
    out["node 8 devices"] = measure(Node(), args.passes, args.interval)
    sizes = [out[f"fabric {n}x{PORTS}"] for n in args.switches]
    if len(sizes) >= 2:
        a, b = sizes[0], sizes[-1]
        out["fabric slope"] = {"series": b["series"] - a["series"],
                               "cpu_per_100k": (b["cpu_per_pass"] - a["cpu_per_pass"])
                               / (b["series"] - a["series"]) * 1e5}
    return out


def run_child(exporter: Path, argv: list[str]) -> dict[str, Any]:
    """This bench in a child process, over the exporter package in `exporter`."""
    env = {**os.environ, "PYTHONPATH": str(exporter)}
    child = subprocess.run([sys.executable, __file__, "--json", *argv], env=env, check=True,
                           capture_output=True, text=True)
    result: dict[str, Any] = json.loads(child.stdout.splitlines()[-1])
    return result


def export_tree(ref: str, into: Path) -> Path:
    """The exporter folder of git commit `ref`, extracted under `into`."""
    repo = Path(__file__).resolve().parents[1]
    archive = subprocess.run(["git", "-C", str(repo), "archive", ref, "exporter"],
                             check=True, capture_output=True).stdout
    tar_path = into / "tree.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, filter="data")
    return into / "exporter"


def abba(rounds: int) -> list[bool]:
    """The measuring order, True for this tree: this, before, before, this, this, before, ..."""
    return [(i + 1) // 2 % 2 == 0 for i in range(2 * rounds)]


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per store, the run with the median CPU per 100k series (of an even count, the lower middle
    one), its other figures with it, and every run's CPU per 100k series."""
    out: dict[str, Any] = {}
    for name in runs[0]:
        figs = sorted((r[name] for r in runs), key=lambda f: f["cpu_per_100k"])
        out[name] = {**figs[(len(figs) - 1) // 2], "rounds": [r[name]["cpu_per_100k"] for r in runs]}
    return out


def compare(ref: str, argv: list[str], rounds: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """This tree and the tree of `ref`, alternated ABBA, each run a fresh child process."""
    here = Path(__file__).resolve().parents[1] / "exporter"
    runs: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        there = export_tree(ref, Path(tmp))
        for this_tree in abba(rounds):
            runs[this_tree].append(run_child(here if this_tree else there, argv))
    return median_of(runs[True]), median_of(runs[False])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--switches", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--interval", type=float, default=60.0, help="health interval (simulated s)")
    parser.add_argument("--before", metavar="REF", help="also measure the tree of this git commit")
    parser.add_argument("--rounds", type=int, default=2,
                        help="with --before: rounds, each tree measured once per round, "
                             "the order turned every round (ABBA)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    argv = ["--switches", *map(str, args.switches), "--passes", str(args.passes),
            "--interval", str(args.interval)]
    if args.json:
        print(json.dumps(run_here(args)))
        return
    before: dict[str, Any] | None = None
    if args.before:
        after, before = compare(args.before, argv, args.rounds)
    else:
        after = run_here(args)
    print(f"health pass, window {HEALTH['window']:g}s, event_window {HEALTH['event_window']:g}s, "
          f"one pass per {args.interval:g}s of simulated time, counters advancing every pass; "
          f"CPU median of {args.passes} passes")
    for name, now in after.items():
        line = f"  {name:18} {now['series']:>8} series"
        for label, fig in (("this tree", now), (f"{args.before}", before.get(name) if before else None)):
            if fig is None:
                continue
            line += f" | {label}: {fig['cpu_per_100k']:.3f} s CPU /100k series"
            if "cpu_per_pass" in fig:
                line += (f" ({fig['cpu_per_pass'] * 1000:.1f} ms/pass; cyclic GC over the loop "
                         f"{fig.get('gc_per_pass', float('nan')) * 1000:.1f} ms/pass; "
                         f"{fig['retained_bytes_per_series']:.0f} B retained/series, score {fig['score']})")
            if "rounds" in fig:
                line += " [rounds: " + ", ".join(f"{r:.3f}" for r in fig["rounds"]) + "]"
        print(line)
    if before:
        same = all(before[k].get("reports") == v.get("reports") for k, v in after.items() if "reports" in v)
        print(f"  health reports of every measured pass identical in both trees: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
