"""Result files dropped by jobs (a Kubernetes Job/CronJob, a Slurm step): multi-node nccl-tests
need MPI and a scheduler, which infrapulse does not become; the job writes its output into a
watched directory and the probe source ingests each file once.

A result file is `*.txt`, `*.log`, `*.out` or `*.json` (nccl-tests text or -J JSON, perftest
text or --out_json). Its scope comes from a sidecar `<file>.scope` (YAML: scope, and optionally
tool: nccl|perftest, path: fabric|intra_node, collective, report_gbits) or else from the file
name: `<scope>__<anything>.<ext>` (the part before the first double underscore). Hidden files,
`*.tmp` and `*.partial` are ignored, and a file is read only once its modification time is
`settle` seconds old, so a job may write it slowly; write the sidecar first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import nccl, perftest
from .results import NcclResult, PerftestResult, ProbeParseError

RESULT_SUFFIXES = (".txt", ".log", ".out", ".json")
SIDECAR = ".scope"
_SCOPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:>,=+-]{0,127}$")


@dataclass(frozen=True)
class Candidate:
    path: Path
    size: int
    mtime_ns: int

    @property
    def key(self) -> str:
        return f"{self.path.name}:{self.size}:{self.mtime_ns}"


@dataclass
class Dropped:
    scope: str
    path_label: str
    tool: str
    nccl: NcclResult | None = None
    perftest: list[PerftestResult] | None = None


def candidates(directory: Path, ingested: dict[str, Any], settle: float, now: float) -> list[Candidate]:
    """Result files not ingested yet and left alone for `settle` seconds, oldest first."""
    out = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return []
    for entry in entries:
        name = entry.name
        if name.startswith(".") or not name.endswith(RESULT_SUFFIXES):
            continue
        try:
            st = entry.stat()
        except OSError:
            continue
        if not entry.is_file() or now - st.st_mtime < settle:
            continue
        cand = Candidate(entry, st.st_size, st.st_mtime_ns)
        if cand.key not in ingested:
            out.append(cand)
    return sorted(out, key=lambda c: c.mtime_ns)


class InboxError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def sidecar(path: Path) -> dict[str, Any]:
    side = path.with_name(path.name + SIDECAR)
    if not side.exists():
        return {}
    try:
        data = yaml.safe_load(side.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InboxError("unreadable", f"{side.name}: {exc}") from None
    if not isinstance(data, dict):
        raise InboxError("no_scope", f"{side.name}: expected a mapping with `scope`")
    return data


def scope_of(path: Path, meta: dict[str, Any]) -> str:
    scope = str(meta.get("scope") or "")
    if not scope and "__" in path.name:
        scope = path.name.split("__", 1)[0]
    if not _SCOPE.match(scope):
        raise InboxError("no_scope", f"{path.name}: no scope (a {SIDECAR} sidecar with `scope:`, or a file "
                                     f"name `<scope>__...`); got {scope!r}")
    return scope


def sniff(text: str) -> str:
    """"nccl" or "perftest", from what the text looks like."""
    head = text[:20000]
    if "test_info" in head or "#bytes" in head or re.search(r"\b(BW|Latency) Test\b", head):
        return "perftest"
    return "nccl"


def read(cand: Candidate, max_bytes: int) -> Dropped:
    if cand.size > max_bytes:
        raise InboxError("too_large", f"{cand.path.name}: {cand.size} bytes, more than {max_bytes}")
    meta = sidecar(cand.path)
    scope = scope_of(cand.path, meta)
    try:
        text = cand.path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InboxError("unreadable", f"{cand.path.name}: {exc.strerror or exc}") from None
    tool = str(meta.get("tool") or sniff(text))
    path_label = str(meta.get("path") or "fabric")
    try:
        if tool == "perftest":
            return Dropped(scope, path_label, tool, perftest=perftest.parse(text,
                                                                            bool(meta.get("report_gbits"))))
        return Dropped(scope, path_label, "nccl", nccl=nccl.parse(text, str(meta.get("collective") or "")))
    except ProbeParseError as exc:
        raise InboxError("unparsable", f"{cand.path.name}: {exc}") from None
