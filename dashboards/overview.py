"""Cluster overview: health scores, components, top detractors, source status, firing alerts."""

from __future__ import annotations

from grafana import (
    SCORE_STEPS,
    Dashboard,
    alert_annotation,
    query_variable,
    row,
    stat,
    table,
    target,
    timeseries,
)
from promql import by, rate, sel

UID = "infrapulse-overview"

SCORE = sel("infrapulse_health_score")


def build() -> Dashboard:
    panels = [
        row("Health"),
        stat("Cluster health score",
             "Cluster score of the worst role (node or fabric): the coverage-weighted mean over "
             "instances, capped at the worst instance + 50 (recording rule "
             "role:infrapulse_health_score:cluster). Colours: the default status bands (below 80 "
             "degraded, below 50 critical); the alerts use each role's own bands. "
             "Cluster-wide: not narrowed by the job/instance variables.",
             [target("min(role:infrapulse_health_score:cluster)")], "none", steps=SCORE_STEPS,
             min=0, max=100),
        stat("Worst instance score",
             "The lowest health score of any selected instance: one broken node or switch fabric "
             "shows here even when the cluster mean looks fine.",
             [target(f"min({SCORE})")], "none", steps=SCORE_STEPS, min=0, max=100),
        stat("Health data coverage",
             "Share of the health signals that had data (unknown signals are left out of the score, "
             "never counted as healthy). Low coverage means the score rests on few signals.",
             [target(f"avg({sel('infrapulse_health_coverage_ratio')})")], "percentunit",
             steps=[{"color": "red", "value": None}, {"color": "orange", "value": 0.5},
                    {"color": "green", "value": 0.8}], min=0, max=1),
        stat("Alerts firing",
             "Number of infrapulse alerts firing now (all severities and teams).",
             [target('count(ALERTS{alertstate="firing", alertname=~"Infrapulse.*"}) or vector(0)')],
             "none", steps=[{"color": "green", "value": None}, {"color": "red", "value": 1}]),
        timeseries("Cluster score by role",
                   "Per role (node = GPU hosts, fabric = switch collectors): the cluster score, the "
                   "coverage-weighted mean and the worst instance (recording rules "
                   "role:infrapulse_health_score:*). Cluster-wide: not narrowed by the variables.",
                   [target("role:infrapulse_health_score:cluster", "cluster {{role}}"),
                    target("role:infrapulse_health_score:weighted_mean", "weighted mean {{role}}"),
                    target("role:infrapulse_health_score:min", "worst {{role}}")],
                   "none", min=0, max=100),
        timeseries("Health score per instance",
                   "Overall health score of every selected instance; caps apply when a critical "
                   "signal fires (e.g. an XID or a flapping link).",
                   [target(SCORE, "{{instance}}")], "none", min=0, max=100),
        timeseries("Component scores",
                   "Sub-score of each component (network, rdma, gpu, serving, ...) per instance.",
                   [target(sel("infrapulse_health_component_score"), "{{instance}} {{component}}")],
                   "none", min=0, max=100),
        table("Top detractors",
              "The three signals that pull each instance's score down the most, with the target "
              "(port, queue, GPU, endpoint) they were measured on. /api/v1/health on the instance "
              "has the measured value and the threshold.",
              [target(sel("infrapulse_health_detractor_info"), instant=True, table=True)],
              hide=("Time", "__name__", "Value"), width=12),
        table("Lowest signal scores",
              "The ten lowest signal sub-scores across the selected instances (worst target of each "
              "signal).",
              [target(f"bottomk(10, {sel('infrapulse_health_signal_score')})", instant=True, table=True)],
              width=12),
        table("Recent inspections",
              "Each node's latest inspection (docs/inspections.md): when its score crossed, the layer "
              "its verdict names (queue, compute, network, none), the cause and the target (endpoint, "
              "GPU, port); the report is at http://<instance>/inspections/latest. Newest first.",
              [target(f"sort_desc({sel('instance:infrapulse_inspection_last:timestamp')}) * 1000",
                      instant=True, table=True)],
              unit="dateTimeAsIso", hide=("Time", "__name__", "job"), width=12),
        timeseries("Inspections per hour by verdict",
                   "How often the selected nodes were inspected in the last hour, per verdict layer: "
                   "many network verdicts across nodes point at the fabric, queue verdicts at load.",
                   [target(f"sum by (verdict_layer) "
                           f"({sel('instance_verdict_layer:infrapulse_inspections:increase1h')})",
                           "{{verdict_layer}}")], "none", min=0),
        row("Sources"),
        table("Source status",
              "Each source instance (source, target) with the reason of its last collection: ok, "
              "partial, or why it failed. Value 1 = up.",
              [target(f"{sel('infrapulse_source_up')}\n"
                      "* on (job, instance, source, target) group_left (reason)\n"
                      f"{sel('infrapulse_source_status_info')}", instant=True, table=True)],
              width=12),
        timeseries("Sources down",
                   "Source instances whose last collection failed, per scrape target.",
                   [target(by("job, instance", f"{sel('infrapulse_source_up')} == bool 0"), "{{instance}}")],
                   "none", min=0),
        timeseries("Collection duration",
                   "Wall time of the last collection per source instance; a slow source never delays "
                   "others or a scrape, but a rising value shows a struggling device or endpoint.",
                   [target(sel("infrapulse_source_collect_duration_seconds"),
                           "{{instance}} {{source}} {{target}}")],
                   "s", min=0),
        timeseries("Collection errors",
                   "Failed collections per second, per source instance.",
                   [target(by("job, instance, source", rate(sel("infrapulse_source_errors_total"))),
                           "{{instance}} {{source}}")],
                   "cps", min=0),
        timeseries("Scrape health",
                   "Prometheus's own view: whether each exporter was scraped (up) and how long the scrape "
                   "took.",
                   [target(sel("up"), "up {{instance}}"),
                    target(sel("scrape_duration_seconds"), "scrape {{instance}}")],
                   "none", right_axis={"B": "s"}, min=0),
        timeseries("Series per source",
                   "Series each source holds in the exporter (cardinality self-monitoring).",
                   [target(sel("infrapulse_exporter_series"), "{{instance}} {{source}}")], "short", min=0),
        row("Alerts"),
        table("Firing and pending alerts",
              "Every infrapulse alert that is pending or firing now, with its team (noc, ml) and "
              "severity.",
              [target('ALERTS{alertname=~"Infrapulse.*"}', instant=True, table=True)],
              hide=("Time", "__name__", "Value"), width=24),
    ]
    return Dashboard(
        uid=UID, title="infrapulse / Cluster overview",
        description="Health of the AI cluster at a glance: cluster, node and fabric scores, component "
                    "scores, top detractors, source status and firing alerts.",
        tags=["overview"],
        variables=[
            query_variable("job", "label_values(infrapulse_build_info, job)"),
            query_variable("instance", 'label_values(infrapulse_build_info{job=~"$job"}, instance)'),
        ],
        panels=panels,
        annotations=[alert_annotation("Critical alerts",
                                      'ALERTS{alertstate="firing", severity="critical", '
                                      'alertname=~"Infrapulse.*"}',
                                      "red")],
    )
