#!/usr/bin/env python3
"""What the `kmsg` source costs: (a) a quiet log, per pass, as a share of one core at the default
interval (5 s; the issue's budget is 0.05 %), and (b) CPU per 10k records under a flood of 10k
lines/s, each pass bounded by `max_records_per_cycle` (10,000).

(a) reads this host's /dev/kmsg (the character device, one record per read(2); EAGAIN when
caught up) after draining it, or an empty regular file where /dev/kmsg is not readable; the floor
beside it is one bare non-blocking read(2) that returns EAGAIN.
(b) the flood is the real kernel-log line shapes of ../shared/real/kmsg (read in place: every
capture's kernel records, cycled), written as raw /dev/kmsg records (`pri,seq,usec,-;msg`) to a
temporary file the source follows; each pass is the source's whole work (read, parse, classify,
count, snapshot), nothing cached between passes but what the source keeps. Peers on the same
records in one run: util-linux `dmesg --file` (it reads the syslog(2) form `<pri>[secs] msg`, and
decodes facility/level with -x, output to /dev/null; CPU from the child's rusage) and the floor,
a plain Python loop that only splits each raw record into header and message.

Usage: .venv/bin/python bench/kmsg_flood.py [--records 50000] [--quiet-passes 2000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from infrapulse import config as config_mod
from infrapulse.sources.base import SourceContext
from infrapulse.sources.kmsg.records import parse_lines
from infrapulse.sources.kmsg.source import KmsgSource
from infrapulse.store import Store

REAL = Path(__file__).resolve().parents[1].parent / "shared" / "real" / "kmsg"
INTERVAL = 5.0  # the default sources.kmsg.interval
PER_CYCLE = 10_000  # the default sources.kmsg.max_records_per_cycle
FLOOD_RATE = 10_000  # lines/s
BUDGET = 0.0005  # 0.05 % of a core
DEV_KMSG = "/dev/kmsg"


def real_messages() -> list[tuple[int, str]]:
    """(priority, message) of every kernel record in every real capture, in file order."""
    out = []
    for path in sorted(REAL.glob("*.txt")):
        for record in parse_lines(path.read_text(encoding="utf-8", errors="replace").splitlines()):
            if record.kernel and record.message:
                out.append((record.priority if record.priority is not None else 4, record.message))
    return out


def write_flood(raw: Path, syslog: Path, messages: list[tuple[int, str]], count: int) -> None:
    with raw.open("w") as r, syslog.open("w") as s:
        for seq in range(1, count + 1):
            prio, msg = messages[seq % len(messages)]
            usec = seq * 100  # 10k lines/s
            escaped, flat = msg.replace("\n", "\\x0a"), msg.replace("\n", " ")
            r.write(f"{prio},{seq},{usec},-;{escaped}\n")
            s.write(f"<{prio}>[{usec // 1_000_000:5d}.{usec % 1_000_000:06d}] {flat}\n")


def _source(path: str) -> KmsgSource:
    section = {"enabled": True, "path": path, "boot_id_path": ""}
    cfg = config_mod.load_text(yaml.safe_dump({"sources": {"kmsg": section}}), "<bench>")
    return KmsgSource(cfg.sources["kmsg"], SourceContext(store=Store(), interval=INTERVAL))


def flood(raw: Path) -> dict[str, Any]:
    """The source following the flood file: CPU per pass, records per pass."""
    source = _source(str(raw))
    cpu, records = [], []
    try:
        while True:
            before = source.records
            started = time.process_time()
            result = source.collect_once()
            cpu.append(time.process_time() - started)
            assert result.reason == "ok", result.message
            records.append(source.records - before)
            if records[-1] == 0:
                break
    finally:
        source.reader.close()
    full = [c for c, n in zip(cpu, records) if n == PER_CYCLE]
    per_10k = statistics.median(full) if full else sum(cpu) / max(sum(records), 1) * 10_000
    return {"passes": len(records) - 1, "max_per_pass": max(records), "cpu_per_10k": per_10k,
            "events": sum(source.events.values())}


def dmesg_peer(syslog: Path) -> float | None:
    """CPU seconds of `dmesg --file <syslog> -x` over the whole flood (None where no dmesg)."""
    exe = shutil.which("dmesg")
    if exe is None:
        return None
    with open(os.devnull, "w") as null:
        proc = subprocess.Popen([exe, "--file", str(syslog), "-x"], stdout=null)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        return None
    return usage.ru_utime + usage.ru_stime


def floor(raw: Path) -> float:
    """CPU seconds of a plain loop that only splits each raw record (read in 64 KiB chunks)."""
    started = time.process_time()
    n = 0
    with raw.open("rb") as f:
        for line in f:
            header, _, message = line.partition(b";")
            n += 1 if message else 0
    return time.process_time() - started


def quiet(passes: int) -> dict[str, Any]:
    """A pass over a caught-up log: this host's /dev/kmsg where readable, else an empty file."""
    tmp = None
    path = DEV_KMSG
    if not os.access(DEV_KMSG, os.R_OK):
        tmp = tempfile.NamedTemporaryFile(suffix=".kmsg")
        path = tmp.name
    source = _source(path)
    try:
        while source.reader.read(PER_CYCLE).records:
            pass  # drain the ring buffer first: what follows is a caught-up log
        cpu = []
        for _ in range(passes):
            started = time.process_time()
            source.collect_once()
            cpu.append(time.process_time() - started)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        os.lseek(fd, 0, os.SEEK_END)
        bare = []
        for _ in range(passes):
            started = time.process_time()
            try:
                os.read(fd, 8192)
            except BlockingIOError:
                pass
            bare.append(time.process_time() - started)
        os.close(fd)
    finally:
        source.reader.close()
        if tmp is not None:
            tmp.close()
    return {"path": path, "cpu_per_pass": statistics.mean(cpu), "floor_per_pass": statistics.mean(bare),
            "series": len(source.snapshot())}


def run(records: int, quiet_passes: int) -> dict[str, Any]:
    messages = real_messages()
    with tempfile.TemporaryDirectory() as tmp:
        raw, syslog = Path(tmp) / "flood.kmsg", Path(tmp) / "flood.syslog"
        write_flood(raw, syslog, messages, records)
        ours = flood(raw)
        peer = dmesg_peer(syslog)
        split = floor(raw)
    q = quiet(quiet_passes)
    per_10k_peer = peer / records * 10_000 if peer else None
    per_10k_floor = split / records * 10_000
    return {"messages": len(messages), "records": records, **ours, "dmesg_per_10k": per_10k_peer,
            "floor_per_10k": per_10k_floor, "quiet": q}


def report(r: dict[str, Any]) -> None:
    q = r["quiet"]
    share = q["cpu_per_pass"] / INTERVAL
    print(f"kmsg quiet log ({q['path']}, {q['series']} series): {q['cpu_per_pass'] * 1e6:.1f} us CPU "
          f"per pass (floor: one EAGAIN read(2) {q['floor_per_pass'] * 1e6:.1f} us)")
    print(f"  share of a core {share * 100:.5f} % at {INTERVAL:g} s (budget {BUDGET * 100:.2f} %: "
          f"{'within' if share <= BUDGET else 'OVER'}, {share / BUDGET:.3f}x of it)")
    print(f"kmsg flood: {r['records']:,} raw records cycled from {r['messages']} real kernel records, "
          f"{r['passes']} passes of at most {r['max_per_pass']:,} (max_records_per_cycle), "
          f"{r['events']:,} events counted")
    ours = r["cpu_per_10k"]
    print(f"  infrapulse kmsg  {ours * 1e3:8.2f} ms CPU per 10k records "
          "(read, parse, classify, count, snapshot)")
    if r["dmesg_per_10k"]:
        print(f"  dmesg --file -x  {r['dmesg_per_10k'] * 1e3:8.2f} ms CPU per 10k records "
              f"(parse + decode + print)  ratio {ours / r['dmesg_per_10k']:.2f}x")
    else:
        print("  dmesg --file: not available here (no ratio)")
    print(f"  split-only floor {r['floor_per_10k'] * 1e3:8.2f} ms CPU per 10k records  "
          f"ratio {ours / r['floor_per_10k']:.1f}x")
    flood_share = ours / INTERVAL
    print(f"  a full pass every {INTERVAL:g} s: {flood_share * 100:.2f} % of a core; at {FLOOD_RATE:,} "
          f"lines/s the bound reads {PER_CYCLE / INTERVAL:,.0f}/s, the rest waits (on /dev/kmsg the ring "
          "buffer overwrites it: infrapulse_kmsg_overruns_total)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--quiet-passes", type=int, default=2000)
    args = parser.parse_args()
    report(run(args.records, args.quiet_passes))


if __name__ == "__main__":
    main()
