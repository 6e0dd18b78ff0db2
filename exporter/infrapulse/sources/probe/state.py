"""The probe source's memory across restarts, reboots and upgrades: one JSON file under
`<state_dir>/probe/` written atomically (temporary file, fsync, rename) after every change.

A firmware upgrade usually reboots the node; the "before" of a before -> after comparison is
the baseline written here before the reboot. The file holds, per tracked metric, its recent
runs (value, time, versions, whether it entered the baseline), the current verdict and the
last version change's before -> after; per probe, its last run, result and series; the
versions seen last; and the result files of the inbox already ingested.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

FORMAT = 1
HISTORY_MAX = 30  # runs kept per tracked metric (the baseline uses the last `runs` of them)
INGESTED_MAX = 10000

log = logging.getLogger("infrapulse.source.probe")


class StateError(Exception):
    """The state directory cannot be created, read or written."""


def empty() -> dict[str, Any]:
    return {"format": FORMAT, "versions": {}, "version_changes": {}, "pending_change": None,
            "next_run": 0.0, "epoch": 0.0, "probes": {}, "metrics": {}, "ingested": {}, "inbox_series": {}}


class StateFile:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / "state.json"

    def load(self) -> dict[str, Any]:
        """The saved state, or a fresh one. A corrupt file is moved aside (never silently lost)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateError(f"cannot create {self.directory}: {exc.strerror or exc}") from None
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return empty()
        except OSError as exc:
            raise StateError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format') if isinstance(data, dict) else '?'}")
        except ValueError as exc:
            aside = self.path.with_name(f"state.json.corrupt-{int(os.path.getmtime(self.path))}")
            os.replace(self.path, aside)
            log.error("probe state file unreadable; moved aside, baselines start over",
                      extra={"file": str(self.path), "moved_to": str(aside), "error": str(exc)})
            return empty()
        state = empty()
        state.update(data)
        return state

    def save(self, state: dict[str, Any]) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".state.", dir=self.directory)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(state, f, separators=(",", ":"), sort_keys=True)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            dir_fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as exc:
            raise StateError(f"cannot write {self.path}: {exc.strerror or exc}") from None


def trim(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return history[-HISTORY_MAX:]


def trim_ingested(ingested: dict[str, Any]) -> dict[str, Any]:
    if len(ingested) <= INGESTED_MAX:
        return ingested
    keep = sorted(ingested.items(), key=lambda kv: kv[1].get("at", 0.0))[-INGESTED_MAX:]
    return dict(keep)
