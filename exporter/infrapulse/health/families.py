"""The families the health scorer publishes (source "health")."""

from .. import catalog

HEALTH_SCORE = catalog.declare(
    "infrapulse_health_score", catalog.GAUGE,
    "Overall health of this instance, 0 (broken) to 100 (healthy): components weighted, capped at "
    "health.critical_cap while any critical signal fires. Absent when no signal has data.",
    (), source="health")
HEALTH_STATUS = catalog.declare(
    "infrapulse_health_status", catalog.GAUGE,
    "Status of this instance as a state set: 1 for the current status (healthy, degraded, critical, "
    "unknown), 0 for the other three. The status is the worst of the score's band "
    "(health.status_thresholds) and each signal's state: any signal at or past its bad level is at "
    "least degraded, a critical one critical, a latency SLO past its objective degraded; below "
    "health.coverage_floor a status that would be healthy is unknown (docs/health.md). The "
    "InfrapulseHealthScoreLow alerts fire on it, so the rule lives only here.",
    ("status",), source="health")
STATUS_THRESHOLD = catalog.declare(
    "infrapulse_health_status_threshold", catalog.GAUGE,
    "The score below which the status is at least `status` (degraded or critical): this daemon's "
    "health.status_thresholds, for rules that compare aggregated scores with the same bands.",
    ("status",), source="health")
COMPONENT_SCORE = catalog.declare(
    "infrapulse_health_component_score", catalog.GAUGE,
    "Score 0-100 of one component (network, rdma, gpu, serving, topology, probe): its signals weighted, "
    "capped by its worst critical signal. Absent while the component has no data.",
    ("component",), source="health")
SIGNAL_SCORE = catalog.declare(
    "infrapulse_health_signal_score", catalog.GAUGE,
    "Sub-score 0-100 of one signal: that of its worst target (port, queue, GPU, endpoint).",
    ("component", "signal"), source="health")
COVERAGE = catalog.declare(
    "infrapulse_health_coverage_ratio", catalog.GAUGE,
    "Weighted share (0-1) of the applicable health signals that had data in this pass; missing "
    "data is left out of the score, never counted as healthy.",
    (), unit="ratio", source="health")
DETRACTOR = catalog.declare(
    "infrapulse_health_detractor_info", catalog.INFO,
    "The top 3 things pulling the score down (rank 1 = largest impact); the sentence is in "
    "/api/v1/health.",
    ("rank", "component", "signal", "target"), source="health")
STATUS_REASON = catalog.declare(
    "infrapulse_health_status_reason_info", catalog.INFO,
    "Why the status is not healthy, worst first (at most 5): the rule (score_band, critical_signal, "
    "signal_past_bad, slo_breached, coverage_below_floor), the signal and its worst target; the sentence "
    "is in /api/v1/health's status_reasons.",
    ("rank", "status", "rule", "component", "signal", "target"), source="health")
