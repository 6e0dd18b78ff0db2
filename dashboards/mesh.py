"""Latency-mesh panels (source `mesh`): RTT by peer group and per peer, loss per peer.

`panels()` returns a row of panels for any dashboard that has the job and instance variables;
the fabric dashboard shows them today. Per peer only the sent/lost counters and the p99 gauge
exist (cardinality), so the distribution is read per peer group from the histogram.
"""

from __future__ import annotations

from grafana import heatmap, row, target, timeseries
from promql import by, quantile, rate, sel

LOSS = "instance_peer:infrapulse_probe_mesh_lost_per_sent:ratio_rate10m"
RTT = "infrapulse_probe_mesh_rtt_seconds"
P99 = "infrapulse_probe_mesh_rtt_p99_seconds"


def series_heatmap(title: str, description: str, targets: list[dict], unit: str) -> dict:
    """A heatmap whose rows are the query's series (one per legend) and whose colour is the value:
    the Pingmesh picture, a row per peer (group) over time."""
    panel = heatmap(title, description, targets, unit, width=12, height=9)
    panel["options"].update({
        "calculate": False,
        "rowsFrame": {"layout": "auto"},
        "yAxis": {"axisPlacement": "left"},
        "cellValues": {"unit": unit},
        "color": {"mode": "scheme", "scheme": "RdYlGn", "reverse": True, "steps": 64, "exponent": 0.5},
    })
    del panel["options"]["calculation"]
    return panel


def panels() -> list[dict]:
    return [
        row("Latency mesh"),
        series_heatmap(
            "Mesh RTT p99 by peer group",
            "P99 round-trip time of the mesh probes of all selected nodes together, one row per peer "
            "group: same_switch (the peer hangs off one of the node's switches), other_switch (the path "
            "crosses the spine), unknown (no switch known for the node or the peer). A red row is "
            "queueing on that kind of path.",
            [target(quantile(0.99, RTT, "peer_group"), "{{peer_group}}")], "s"),
        series_heatmap(
            "Mesh RTT p99 by peer",
            "P99 round-trip time from each selected node to each of its peers over the source's p99 window "
            "(5 minutes by default), one row per node -> peer pair: a red row is one path, a red column "
            "is a moment the whole fabric queued.",
            [target(sel(P99), "{{instance}} -> {{peer}}")], "s"),
        timeseries(
            "Mesh loss by peer",
            "Share of mesh probes to each peer that got no reply within the timeout, over 10 minutes "
            "(recording rule; alerted above 1% with at least 3 probes lost, critical above 20%).",
            [target(sel(LOSS), "{{instance}} -> {{peer}}")], "percentunit", min=0),
        timeseries(
            "Mesh RTT p99 by peer",
            "P99 round-trip time of the mesh probes to each peer (the time the peer's daemon held a "
            "request is subtracted). Alerted above 1 ms for 15 minutes.",
            [target(sel(P99), "{{instance}} -> {{peer}}")], "s", min=0),
        timeseries(
            "Mesh RTT quantiles by peer group",
            "Median, P99 and P99.9 round-trip time per peer group, all selected nodes together: P99 and "
            "P99.9 drifting away from the median is queueing, all three moving is a longer or slower path.",
            [target(quantile(q, RTT, "peer_group"), f"{{{{peer_group}}}} p{q * 100:g}")
             for q in (0.5, 0.99, 0.999)], "s", min=0),
        timeseries(
            "Mesh responder requests",
            "Probe requests reaching the selected nodes' responders per second by outcome: answered, "
            "answered_late (a late notice followed the reply), unlisted (from an address that is no peer: "
            "never answered), rate_limited, malformed, send_failed.",
            [target(by("instance, outcome", rate(sel("infrapulse_probe_mesh_responder_requests_total"))),
                    "{{instance}} {{outcome}}")], "reqps", min=0),
    ]
