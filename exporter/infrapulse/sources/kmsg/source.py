"""Source `kmsg`: each pass reads the kernel log records that arrived since the last pass (at most
`max_records_per_cycle`), classifies them (classify.py) and publishes the counters.

One target (`kmsg`). A log that cannot be opened or read (no /dev/kmsg in the container, no
CAP_SYSLOG or dmesg_restrict) is target down with reason `unreadable` and the path in the
message: never a quiet zero. Counters start at 0 with the process; the cursor keeps a restart
from counting the ring buffer's old records a second time.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ...schema import AutoBool, Duration, Int, Str, setting, settings
from ...store import Snapshot
from ..base import PollingSettings, PollingSource, SourceContext, TargetResult
from . import families as F
from .classify import Event, classify
from .reader import KmsgReader, Unreadable

TARGET = "kmsg"
DEFAULT_PATH = "/dev/kmsg"
DEFAULT_BOOT_ID = "/proc/sys/kernel/random/boot_id"


@settings("The kernel log: NVRM Xid / fallen off the bus, NVSwitch SXid, mlx5 health, command and TX "
          "timeouts, link and module events, PCIe AER, bnxt errors, counted per PCI function "
          "(docs/kmsg.md).")
@dataclass(kw_only=True, slots=True)
class KmsgSettings(PollingSettings):
    enabled: bool | str = setting(AutoBool("auto: on when `path` exists."))
    interval: float = setting(Duration("How often new records are read.", default="5s", min=0.05))
    path: str = setting(Str("The kernel log: /dev/kmsg, or (testing, the demo) a file or FIFO of raw "
                            "records or dmesg/journal lines, followed as it grows.", default=DEFAULT_PATH))
    boot_id_path: str = setting(Str("Names this boot, so a cursor from an earlier boot is not trusted "
                                    "(\"\" = not read).", default=DEFAULT_BOOT_ID))
    max_records_per_cycle: int = setting(Int("Most records read per pass; the rest wait for the next one.",
                                             default=10000, min=1))


class KmsgSource(PollingSource[KmsgSettings]):
    name = F.SRC
    role = "node"
    CONFIG = KmsgSettings.SCHEMA

    def __init__(self, config: KmsgSettings, ctx: SourceContext) -> None:
        super().__init__(config, ctx)
        cursor = Path(ctx.state_dir) / "kmsg" / "cursor.json" if ctx.state_dir else None
        self.reader = KmsgReader(config.path, cursor, _boot_id(config.boot_id_path))
        self.events: dict[Event, int] = {}
        self.last: dict[str, tuple[Event, float]] = {}
        self.records = 0
        self.overruns = 0
        self.resets = 0

    @classmethod
    def wanted(cls, config: KmsgSettings) -> bool:
        if config.enabled == "auto":
            return os.path.exists(config.path)
        return config.enabled is True

    @classmethod
    def unavailable(cls, config: KmsgSettings) -> str:
        return "" if os.path.exists(config.path) else f"{config.path} does not exist"

    def default_target(self) -> str:
        return TARGET

    async def collect(self) -> list[TargetResult]:
        return [await asyncio.to_thread(self.collect_once)]

    def collect_once(self) -> TargetResult:
        try:
            batch = self.reader.read(self.config.max_records_per_cycle)
        except Unreadable as exc:
            self.reader.close()  # reopen next pass: the device may come back (a remount, a cap)
            return TargetResult(TARGET, reason="unreadable", message=str(exc))
        now = time.time()
        self.records += len(batch.records)
        self.overruns += batch.overruns
        self.resets += batch.restarts
        for record in batch.records:
            if not record.kernel:
                continue
            for event in classify(record.message):
                self.events[event] = self.events.get(event, 0) + 1
                self.last[event.pci_address] = (event, now)
        errors = []
        try:
            self.reader.save_cursor()
        except OSError as exc:  # counting goes on; a restart would count the buffer again
            errors.append(f"cursor: {exc}")
        return TargetResult(TARGET, self.snapshot(), partial_errors=errors)

    def snapshot(self) -> Snapshot:
        snap = Snapshot()
        for event, count in self.events.items():
            snap.add(F.EVENTS, (event.kind, event.pci_address, event.code, event.severity), float(count))
        for address, (event, when) in self.last.items():
            snap.add(F.LAST_EVENT, (address, event.kind, event.code, event.summary()), 1.0)
            snap.add(F.LAST_EVENT_TIME, (address,), when)
        snap.add(F.RECORDS, (), float(self.records))
        snap.add(F.OVERRUNS, (), float(self.overruns))
        snap.add(F.CURSOR_RESETS, (), float(self.resets))
        return snap

    async def close(self) -> None:
        self.reader.close()


def _boot_id(path: str) -> str:
    if not path:
        return ""
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""
