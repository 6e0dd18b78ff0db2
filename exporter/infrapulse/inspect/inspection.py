"""One inspection: the windows, each layer's ranked findings, the verdict, as a report (JSON).

A report holds metric values, target names (ports, GPUs, endpoints), times and sentences; never
a URL, a header or anything read from a credential file.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from . import queue
from .compare import Finding, Windows, compare, rank
from .recorder import Recorder
from .verdict import decide

TOP_FINDINGS = 25  # per layer: bounds a report's size


def new_id(timestamp: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(timestamp)) + "-" + secrets.token_hex(3)


def findings(recorder: Recorder, win: Windows, extra_network: list[Finding] | None = None
             ) -> dict[str, list[Finding]]:
    queue_findings = rank(compare(recorder, win, "queue") + queue.derive(recorder, win))
    network = rank(compare(recorder, win, "network") + list(extra_network or []))
    return {"queue": queue_findings, "compute": compare(recorder, win, "compute"), "network": network}


def verdict_labels(verdict: dict[str, Any], layers: dict[str, list[Finding]]) -> dict[str, str]:
    """The labels that locate the verdict's target (its finding's, as the health signal measured
    it), for the blast radius; from the target's own words where the finding carries none."""
    target = str(verdict.get("target", ""))
    for f in layers.get(str(verdict.get("layer", "")), []):
        if f.meta.target == target and f.meta.labels:
            return dict(f.meta.labels)
    kind, _, name = target.partition(" ")
    if kind == "GPU":
        return {"gpu": name}
    if kind == "endpoint":
        return {"endpoint": name}
    return {"interface": kind} if kind else {}


def build(host: str, trigger: dict[str, Any], win: Windows, layers: dict[str, list[Finding]],
          endpoints: list[str], notes: list[str], started: float) -> dict[str, Any]:
    verdict = decide(layers["queue"], layers["compute"], layers["network"])
    now = time.time()
    return {
        "id": new_id(win.crossing),
        "host": host,
        "timestamp": win.crossing,
        "finished": now,
        "duration_seconds": round(time.monotonic() - started, 6),
        "trigger": trigger,
        "windows": {"before": {"from": win.before[0], "to": win.before[1]},
                    "since": {"from": win.since[0], "to": win.since[1]}, "onset": win.onset},
        "verdict": verdict.as_json(),
        "layers": [{"name": name, "moved": any(f.moved for f in layers[name]),
                    "findings": [f.as_json() for f in layers[name][:TOP_FINDINGS]],
                    "series": len(layers[name])}
                   for name in ("queue", "compute", "network")],
        "endpoints_on_node": endpoints,
        "notes": notes,
    }
