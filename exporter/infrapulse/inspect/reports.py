"""Inspection reports on disk: one JSON file each under `<state_dir>/inspections/`.

The newest `keep` reports are kept, and fewer when their total size passes `max_bytes` (the
oldest go first), so the directory is bounded whatever happens. A write goes to a temporary
file then renames, so a crash never leaves half a report; a file that cannot be read at start
is skipped and counted. When the directory cannot be written, reports stay in memory (bounded
the same way) and the failure is counted and logged once per kind of error.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger("infrapulse.inspect")

SUBDIR = "inspections"
ID_PATTERN = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$")


class ReportStore:
    def __init__(self, state_dir: str, keep: int, max_bytes: int) -> None:
        self.directory = Path(state_dir) / SUBDIR if state_dir else None
        self.keep = keep
        self.max_bytes = max_bytes
        self.reports: dict[str, dict[str, Any]] = {}  # id -> report, oldest first
        self.sizes: dict[str, int] = {}
        self.errors = 0
        self._logged: set[str] = set()

    # -- loading -----------------------------------------------------------------------------

    def load(self) -> None:
        if self.directory is None or not self.directory.is_dir():
            return
        found: list[tuple[float, str, dict[str, Any], int]] = []
        for path in self.directory.glob("*.json"):
            report_id = path.stem
            if not ID_PATTERN.match(report_id):
                continue
            try:
                raw = path.read_bytes()
                report = json.loads(raw)
                if not isinstance(report, dict) or report.get("id") != report_id:
                    raise ValueError("not an inspection report")
                found.append((float(report.get("timestamp", 0)), report_id, report, len(raw)))
            except (OSError, ValueError) as exc:
                self._error("load", f"{path}: {exc}")
        for _, report_id, report, size in sorted(found, key=lambda f: (f[0], f[1])):
            self.reports[report_id] = report
            self.sizes[report_id] = size
        self._prune()

    # -- saving ------------------------------------------------------------------------------

    def save(self, report: dict[str, Any]) -> None:
        raw = json.dumps(report, separators=(",", ":"), sort_keys=True).encode()
        report_id = str(report["id"])
        self.reports[report_id] = report
        self.sizes[report_id] = len(raw)
        if self.directory is not None:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
                try:
                    with os.fdopen(fd, "wb") as handle:
                        handle.write(raw)
                    os.replace(tmp, self.directory / f"{report_id}.json")
                except BaseException:
                    Path(tmp).unlink(missing_ok=True)
                    raise
            except OSError as exc:
                self._error("save", f"{self.directory}: {exc.strerror or exc}")
        self._prune()

    def _prune(self) -> None:
        while self.reports and (len(self.reports) > self.keep or
                                (sum(self.sizes.values()) > self.max_bytes and len(self.reports) > 1)):
            oldest = next(iter(self.reports))
            del self.reports[oldest]
            del self.sizes[oldest]
            if self.directory is not None:
                try:
                    (self.directory / f"{oldest}.json").unlink(missing_ok=True)
                except OSError as exc:
                    self._error("prune", f"{self.directory}: {exc.strerror or exc}")

    def _error(self, kind: str, message: str) -> None:
        self.errors += 1
        if kind not in self._logged:
            self._logged.add(kind)
            log.error("inspection report store failed", extra={"operation": kind, "error": message})

    # -- reading -----------------------------------------------------------------------------

    def get(self, report_id: str) -> dict[str, Any] | None:
        return self.reports.get(report_id)

    def latest(self) -> dict[str, Any] | None:
        return self.reports[next(reversed(self.reports))] if self.reports else None

    def newest_first(self) -> list[dict[str, Any]]:
        return [self.reports[k] for k in reversed(self.reports)]

    def total_bytes(self) -> int:
        return sum(self.sizes.values())
