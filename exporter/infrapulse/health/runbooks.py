"""Which runbook a detractor links to: the alert that fires for the same problem.

Runbooks are written per alert (docs/runbooks/<Alert>.md) and published under one base URL,
`health.runbook_base_url` here and `--runbook-base` of alerts/generate_runbook_urls.py for the
rules, so the status page and Alertmanager notifications point at the same pages. A signal whose
problem sits on a switch, an RDMA port or this node's NIC links the alert of that place; a signal
no alert covers on its own links the health-score runbook, which explains how to read detractors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

FALLBACK = "InfrapulseHealthScoreLow"

SWITCH, RDMA, NODE = "switch", "rdma", "node"
# signal -> alert, or {place: alert} where the place decides (NODE is the default there).
SIGNAL_RUNBOOKS: dict[str, str | dict[str, str]] = {
    "ecn_marked_ratio": "InfrapulseSwitchQueueEcnMarkingHigh",
    "nic_ecn_marked_ratio": "InfrapulseNicEcnMarkingHigh",
    "pfc_pause_ratio": {SWITCH: "InfrapulseSwitchPfcPauseStorm", NODE: "InfrapulseNicPfcPauseStorm"},
    "pfc_pause_frames_rate": {SWITCH: "InfrapulseSwitchPfcPausesWithoutDrops",
                              NODE: "InfrapulseNicPfcPausesWithoutDrops"},
    "pfc_storm_events": "InfrapulseNicPauseStormEvents",
    "phy_error_rate": {SWITCH: "InfrapulseSwitchInterfaceErrorsWhileUp",
                       RDMA: "InfrapulseRdmaPortSymbolErrorsWhileActive",
                       NODE: "InfrapulseNicPhyErrorsWhileUp"},
    "link_flaps": {SWITCH: "InfrapulseSwitchInterfaceFlapping", RDMA: "InfrapulseRdmaPortFlapping",
                   NODE: "InfrapulseNicLinkFlapping"},
    "gnmi_stream_down": "InfrapulseSwitchTelemetryDown",
    "cnp_rate": "InfrapulseNicEcnMarkingHigh",  # CNPs answer ECN marks: the same congestion
    "retransmission_rate": "InfrapulseRdmaRetransmissionsHigh",
    "port_not_active": "InfrapulseRdmaPortNotActive",
    "rdma_error_ratio": "InfrapulseRdmaErrorRatioHigh",
    "xid_critical": "InfrapulseGpuCriticalXid",
    "xid_other": "InfrapulseGpuCriticalXid",  # the runbook decodes every XID
    "ecc_uncorrectable": "InfrapulseGpuUncorrectableEccErrors",
    "row_remap_pending": "InfrapulseGpuRowRemapFailure",
    "row_remap_failure": "InfrapulseGpuRowRemapFailure",
    "throttle_active": "InfrapulseGpuThrottling",
    "gpu_lost": "InfrapulseGpuLost",
    "gpu_idle_while_queued": "InfrapulseLlmQueueBuildingUp",
    "ttft_p95": "InfrapulseLlmTtftSloBurnRate",
    "itl_p95": "InfrapulseLlmItlSloBurnRate",
    "queue_ratio": "InfrapulseLlmQueueBuildingUp",
    "kv_cache_usage": "InfrapulseLlmKvCacheSaturated",
    "preemption_rate": "InfrapulseLlmKvCacheSaturated",  # vLLM preempts when the KV cache is full
    "endpoint_down": "InfrapulseLlmEndpointDown",
    "uplink_ecn_marked_ratio": "InfrapulseSwitchQueueEcnMarkingHigh",
    "uplink_pfc_pause_ratio": "InfrapulseSwitchPfcPauseStorm",
    "uplink_pfc_pause_frames_rate": "InfrapulseSwitchPfcPausesWithoutDrops",
}
_RDMA_TARGET = re.compile(r"^\S+ port \d+\b")


def place_of(target: str, switches: Iterable[str]) -> str:
    """Where a detractor's target is: a configured switch, an RDMA port, or this node."""
    first = target.split(" ", 1)[0]
    if first in set(switches):
        return SWITCH
    return RDMA if _RDMA_TARGET.match(target) else NODE


def runbook_for(signal: str, target: str, switches: Iterable[str] = ()) -> str:
    """The alert name whose runbook covers `signal` on `target`."""
    entry = SIGNAL_RUNBOOKS.get(signal, FALLBACK)
    if isinstance(entry, str):
        return entry
    place = place_of(target, switches)
    return entry.get(place) or entry[NODE]


def runbook_url(base: str, alert: str) -> str:
    return f"{base if base.endswith('/') else base + '/'}{alert}.md"
