"""Baselines: the active probes (nccl-tests, perftest, dropped job results) against their baselines,
busbw and latency by size over time with version changes as annotations, and the before/after
table of the last version change.

The always-on latency mesh closes it (dashboards/mesh.py: RTT heatmaps by peer group and by
peer, loss and p99 per peer), the same row the fabric dashboard shows the NOC.
"""

from __future__ import annotations

from grafana import (
    DATASOURCE,
    Dashboard,
    alert_annotation,
    query_variable,
    row,
    stat,
    table,
    target,
    timeseries,
)
from mesh import panels as mesh_panels
from promql import SCOPE, by, increase, sel

UID = "infrapulse-baselines"

PROBE = {**SCOPE, "scope": "$scope"}
SIZE_LEGEND = "{{instance}} {{scope}} {{collective}} {{size}} B"


def p(metric: str, **extra: str) -> str:
    return sel(metric, PROBE, **extra)


WRONG = p("infrapulse_probe_nccl_wrong_elements")


def version_annotation() -> dict:
    """A mark at each version change (NIC firmware, drivers, NCCL, config hashes): the series'
    value is the time of the change, so Grafana places the mark there (useValueForTime)."""
    expr = f"{sel('infrapulse_probe_version_change_timestamp_seconds')} * 1000"
    return {
        "name": "Version changes", "datasource": DATASOURCE, "enable": True, "hide": False,
        "iconColor": "purple", "expr": expr, "step": "1m",
        "titleFormat": "{{component}} {{before}} → {{after}}", "textFormat": "{{instance}}",
        "tagKeys": "component", "useValueForTime": True,
    }


def build() -> Dashboard:
    panels = [
        row("Verdicts"),
        stat("Regressions",
             "Tracked metrics whose last run is worse than the baseline (the median of the node's last good "
             "runs) by more than the configured threshold.",
             [target(f"count({p('infrapulse_probe_verdict', verdict='=regression')} == 1) or vector(0)")],
             "none", steps=[{"color": "green", "value": None}, {"color": "orange", "value": 1}]),
        stat("Below floor",
             "Tracked metrics worse than the absolute floor configured for the GPU/NIC model.",
             [target(f"count({p('infrapulse_probe_verdict', verdict='=below_floor')} == 1) or vector(0)")],
             "none", steps=[{"color": "green", "value": None}, {"color": "orange", "value": 1}]),
        stat("Wrong results",
             "Scopes whose last nccl-tests run counted wrong elements: silent data corruption.",
             [target(f"count({by('instance, scope, collective', WRONG)} > 0) or vector(0)")],
             "none", steps=[{"color": "green", "value": None}, {"color": "red", "value": 1}]),
        stat("Oldest good run",
             "Age of the oldest last-good-run among the selected probes; alerted past sources.probe.max_age.",
             [target(f"max({sel('infrapulse_probe_last_good_run_age_seconds')})")], "s"),
        table("Before / after the last version change",
              "Each tracked metric's first run after a version change divided by its baseline from before "
              "the change (Value), with the component and its versions before and after. Above 1 is slower "
              "for latencies, below 1 is lower for bandwidths.",
              [target(p("infrapulse_probe_change_ratio"), instant=True, table=True)], "none",
              hide=("Time", "__name__", "job"), width=24, height=8),
        table("Verdicts",
              "The current verdict of every tracked metric that is not ok.",
              [target(f"{p('infrapulse_probe_verdict', verdict='!=ok')} == 1", instant=True, table=True)],
              "none", hide=("Time", "__name__", "job", "Value"), width=24, height=6),
        row("nccl-tests"),
        timeseries("nccl-tests latency by size",
                   "Out-of-place time per operation of the small sizes (decode-time latency), per run. "
                   "path=intra_node is NVLink/P2P/SHM on one node; fabric results come from multi-node jobs.",
                   [target(p("infrapulse_probe_nccl_time_seconds", placement="=out_of_place",
                             size="[0-9]{1,5}"), SIZE_LEGEND)], "s", min=0),
        timeseries("nccl-tests bus bandwidth by size",
                   "Out-of-place bus bandwidth of the large sizes per run. Compare per size: the table's "
                   "average bus bandwidth depends on the sizes swept.",
                   [target(p("infrapulse_probe_nccl_bus_bandwidth_bytes_per_second",
                             placement="=out_of_place",
                             size="[0-9]{7,}"), SIZE_LEGEND)], "Bps", min=0),
        timeseries("Ratio to baseline",
                   "Last value / baseline per tracked metric and size: 1 is the node's normal. Latencies "
                   "regress upwards, bandwidths downwards.",
                   [target(p("infrapulse_probe_baseline_ratio"),
                           "{{instance}} {{scope}} {{test}} {{metric}} {{size}} B")], "none", min=0),
        timeseries("Wrong elements",
                   "Elements with wrong results per scope and collective in the last run; anything above 0 "
                   "is corrupted data.",
                   [target(by("instance, scope, collective", WRONG),
                           "{{instance}} {{scope}} {{collective}}")], "none", min=0),
        row("perftest"),
        timeseries("RDMA latency by device",
                   "perftest latency (typical = median, p99, p99.9) per NIC pair and size; the traffic "
                   "leaves through one NIC and comes back through the other, across the switches.",
                   [target(p("infrapulse_probe_rdma_latency_seconds", statistic="typical|p99|p99_9"),
                           "{{instance}} {{scope}} {{size}} B {{statistic}}")], "s", min=0),
        timeseries("RDMA bandwidth by device",
                   "perftest average bandwidth per NIC pair and size.",
                   [target(p("infrapulse_probe_rdma_bandwidth_bytes_per_second", statistic="=average"),
                           "{{instance}} {{scope}} {{size}} B")], "Bps", min=0),
        row("Probe runs"),
        timeseries("Last good run age",
                   "Seconds since each probe's last good run (since it was configured if it never had one), "
                   "against the configured limit.",
                   [target(sel("infrapulse_probe_last_good_run_age_seconds"), "{{instance}} {{probe}}"),
                    target(by("instance", sel("infrapulse_probe_max_age_seconds"), "max"),
                           "{{instance}} limit")], "s", min=0),
        table("Probe results",
              "The result of each probe's last attempt: ok, busy (skipped: the node was in use), no_binary, "
              "timeout, failed, wrong_results.",
              [target(f"{sel('infrapulse_probe_last_result')} == 1", instant=True, table=True)], "none",
              hide=("Time", "__name__", "job", "Value")),
        timeseries("Probe attempts",
                   "Probe attempts per result over the last hour.",
                   [target(by("instance, probe, result", increase(sel("infrapulse_probe_runs_total"), "1h")),
                           "{{instance}} {{probe}} {{result}}")], "short", min=0),
        timeseries("Inbox files",
                   "Result files ingested from the inbox directory per outcome over the last hour.",
                   [target(by("instance, result", increase(sel("infrapulse_probe_ingested_files_total"),
                                                           "1h")),
                           "{{instance}} {{result}}")], "short", min=0),
    ]
    panels += mesh_panels()
    return Dashboard(
        uid=UID, title="infrapulse / Baselines",
        description="Active probes against their baselines: nccl-tests and perftest latency and bandwidth by "
                    "size over time, version changes as annotations, the before/after table of the last "
                    "change, and the probes' runs.",
        tags=["probe", "noc", "ml"],
        variables=[
            query_variable("job", "label_values(infrapulse_build_info, job)"),
            query_variable("instance", 'label_values(infrapulse_build_info{job=~"$job"}, instance)'),
            query_variable("scope", 'label_values(infrapulse_probe_baseline_ratio{job=~"$job", '
                                    'instance=~"$instance"}, scope)'),
        ],
        panels=panels,
        annotations=[version_annotation(),
                     alert_annotation("Probe alerts",
                                      'ALERTS{alertstate="firing", alertname=~"InfrapulseProbe.*"}',
                                      "red")],
    )
