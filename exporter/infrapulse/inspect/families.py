"""The families the inspection service publishes (source "inspect")."""

from .. import catalog

SOURCE = "inspect"

INSPECTIONS = catalog.declare(
    "infrapulse_inspections_total", catalog.COUNTER,
    "Inspections this daemon ran, by what started them (score, component, on_demand) and the layer "
    "their verdict names (queue, compute, network, none). Counts since the daemon started.",
    ("trigger", "verdict_layer"), source=SOURCE)
SUPPRESSED = catalog.declare(
    "infrapulse_inspections_suppressed_total", catalog.COUNTER,
    "Inspections not started: busy (one was pending or running) or rate_limited (inspect.min_interval, "
    "or on_demand_min_interval for POST /api/v1/inspections).",
    ("reason",), source=SOURCE)
LAST_TIMESTAMP = catalog.declare(
    "infrapulse_inspection_last_timestamp_seconds", catalog.GAUGE,
    "When the latest inspection (kept under state_dir, so across restarts) crossed or was requested.",
    (), unit="seconds", source=SOURCE)
LAST_INFO = catalog.declare(
    "infrapulse_inspection_last_info", catalog.INFO,
    "The latest inspection's verdict: the layer, the cause (compute, network, engine_saturated, "
    "engine_slow, none) and the target it names; the report is at /inspections/latest.",
    ("id", "verdict_layer", "cause", "target"), source=SOURCE)
DURATION = catalog.declare(
    "infrapulse_inspection_duration_seconds", catalog.GAUGE,
    "How long the latest inspection took to build (the switch-side query included).",
    (), unit="seconds", source=SOURCE)
SERIES = catalog.declare(
    "infrapulse_inspection_recorded_series", catalog.GAUGE,
    "Series the inspection recorder holds (values per target and layer, over inspect.before and since).",
    (), source=SOURCE)
SERIES_DROPPED = catalog.declare(
    "infrapulse_inspection_series_dropped_total", catalog.COUNTER,
    "Series a pass offered the recorder beyond inspect.max_series, left out of inspections.",
    (), source=SOURCE)
STORE_ERRORS = catalog.declare(
    "infrapulse_inspection_store_errors_total", catalog.COUNTER,
    "Reports that could not be written, read back or pruned under state_dir/inspections/.",
    (), source=SOURCE)
STORED = catalog.declare(
    "infrapulse_inspection_stored_reports", catalog.GAUGE,
    "Reports kept (bounded by inspect.keep and inspect.max_bytes).", (), source=SOURCE)
