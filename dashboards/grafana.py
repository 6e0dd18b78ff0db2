"""Small builders for Grafana's classic dashboard JSON model.

Each helper returns plain dicts, so a dashboard module reads like a list of panels and the
output is deterministic (the committed JSON is compared with a fresh run in tests).
Every query panel and target uses the `datasource` template variable, so the dashboards
work against any Prometheus-compatible datasource a user picks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SCHEMA_VERSION = 41  # Grafana 12.0 (the compose image); older schemas are migrated on load
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
GRID_WIDTH = 24

# Health score colours shared by stat and timeseries panels: the daemon's default status bands
# (health.status_thresholds: degraded below 80, critical below 50). The alerts read each daemon's
# own status (infrapulse_health_status), so a daemon with other bands alerts on those.
SCORE_STEPS = [{"color": "red", "value": None}, {"color": "orange", "value": 50},
               {"color": "green", "value": 80}]


# -- targets ---------------------------------------------------------------------------------

def target(expr: str, legend: str = "", *, instant: bool = False, table: bool = False) -> dict:
    """One Prometheus query. refIds are assigned by the panel, in order."""
    return {
        "datasource": DATASOURCE,
        "editorMode": "code",
        "expr": expr,
        "format": "table" if table else "time_series",
        "instant": instant,
        "legendFormat": legend or "__auto",
        "range": not instant,
    }


def _with_ref_ids(targets: list[dict]) -> list[dict]:
    return [{**t, "refId": chr(ord("A") + i)} for i, t in enumerate(targets)]


# -- panels ----------------------------------------------------------------------------------

def _base(kind: str, title: str, description: str, targets: list[dict], unit: str) -> dict:
    if not description:
        raise ValueError(f"panel {title!r}: every panel needs a description")
    if not targets:
        raise ValueError(f"panel {title!r}: every panel needs a query")
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "targets": _with_ref_ids(targets),
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
    }


def timeseries(title: str, description: str, targets: list[dict], unit: str, *,
               min: float | None = None, max: float | None = None, stack: bool = False,
               right_axis: dict[str, str] | None = None, width: int = 12, height: int = 8) -> dict:
    """A time series panel. `right_axis` maps a target's refId to the unit of a second y axis."""
    panel = _base("timeseries", title, description, targets, unit)
    defaults = panel["fieldConfig"]["defaults"]
    defaults["custom"] = {
        "drawStyle": "line", "lineWidth": 1, "fillOpacity": 10 if not stack else 60,
        "showPoints": "never", "spanNulls": False,
        "stacking": {"mode": "normal" if stack else "none", "group": "A"},
    }
    defaults["color"] = {"mode": "palette-classic"}
    if min is not None:
        defaults["min"] = min
    if max is not None:
        defaults["max"] = max
    for ref_id, axis_unit in (right_axis or {}).items():
        panel["fieldConfig"]["overrides"].append({
            "matcher": {"id": "byFrameRefID", "options": ref_id},
            "properties": [
                {"id": "custom.axisPlacement", "value": "right"},
                {"id": "unit", "value": axis_unit},
            ],
        })
    panel["options"] = {
        "legend": {"displayMode": "table", "placement": "bottom", "showLegend": True,
                   "calcs": ["lastNotNull", "max"]},
        "tooltip": {"mode": "multi", "sort": "desc"},
    }
    return _sized(panel, width, height)


def stat(title: str, description: str, targets: list[dict], unit: str, *,
         steps: list[dict] | None = None, min: float | None = None, max: float | None = None,
         width: int = 6, height: int = 4) -> dict:
    panel = _base("stat", title, description, targets, unit)
    defaults = panel["fieldConfig"]["defaults"]
    defaults["thresholds"] = {"mode": "absolute",
                              "steps": steps or [{"color": "green", "value": None}]}
    defaults["color"] = {"mode": "thresholds"}
    if min is not None:
        defaults["min"] = min
    if max is not None:
        defaults["max"] = max
    panel["options"] = {
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        "colorMode": "value", "graphMode": "area", "justifyMode": "auto",
        "orientation": "auto", "textMode": "auto",
    }
    return _sized(panel, width, height)


def table(title: str, description: str, targets: list[dict], unit: str = "none", *,
          hide: tuple[str, ...] = ("Time", "__name__"), width: int = 12, height: int = 8) -> dict:
    """An instant-query table; `hide` lists columns dropped by an organize transformation."""
    panel = _base("table", title, description, targets, unit)
    panel["options"] = {"showHeader": True, "cellHeight": "sm", "footer": {"show": False}}
    panel["transformations"] = [
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {"excludeByName": {name: True for name in hide}}},
    ]
    return _sized(panel, width, height)


def heatmap(title: str, description: str, targets: list[dict], unit: str, *,
            width: int = 12, height: int = 8) -> dict:
    """A heatmap that buckets the values of many gauge series (e.g. queue depths) per time step."""
    panel = _base("heatmap", title, description, targets, unit)
    panel["options"] = {
        "calculate": True,
        "calculation": {"yBuckets": {"mode": "count", "value": "10"}},
        "color": {"mode": "scheme", "scheme": "Oranges", "steps": 64, "exponent": 0.5},
        "cellGap": 1,
        "yAxis": {"axisPlacement": "left", "unit": unit},
        "tooltip": {"mode": "single", "yHistogram": True},
        "legend": {"show": True},
    }
    return _sized(panel, width, height)


def row(title: str) -> dict:
    return {"type": "row", "title": title, "collapsed": False, "panels": [],
            "gridPos": {"h": 1, "w": GRID_WIDTH}}


def _sized(panel: dict, width: int, height: int) -> dict:
    panel["gridPos"] = {"h": height, "w": width}
    return panel


def _layout(panels: list[dict]) -> list[dict]:
    """Flow panels left to right into rows of 24 columns; a row panel starts a new line."""
    x = y = line_height = 0
    placed = []
    for pid, panel in enumerate(panels, start=1):
        w, h = panel["gridPos"]["w"], panel["gridPos"]["h"]
        if panel["type"] == "row" or x + w > GRID_WIDTH:
            y += line_height
            x = line_height = 0
        placed.append({"id": pid, **panel, "gridPos": {"h": h, "w": w, "x": x, "y": y}})
        x += w
        line_height = max(line_height, h)
        if panel["type"] == "row":
            y += h
            x = line_height = 0
    return placed


# -- variables and annotations ---------------------------------------------------------------

def datasource_variable() -> dict:
    return {
        "name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
        "current": {}, "hide": 0, "includeAll": False, "multi": False, "options": [],
        "refresh": 1, "regex": "", "skipUrlSync": False,
    }


def query_variable(name: str, query: str, *, label: str | None = None, multi: bool = True) -> dict:
    """A label_values()/query_result() variable refreshed on time-range change.

    Multi-select variables include "All" as `.+`, so a panel query `label=~"$name"` matches
    every series that has the label.
    """
    variable = {
        "name": name, "label": label or name.title(), "type": "query",
        "datasource": DATASOURCE, "definition": query,
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "refresh": 2, "regex": "", "sort": 1, "hide": 0, "current": {}, "options": [],
        "multi": multi, "includeAll": multi, "skipUrlSync": False,
    }
    if multi:
        variable["allValue"] = ".+"
    return variable


def alert_annotation(name: str, expr: str, color: str) -> dict:
    """Mark the time ranges in which Prometheus alerts (the ALERTS series) were firing."""
    return {
        "name": name, "datasource": DATASOURCE, "enable": True, "hide": False, "iconColor": color,
        "expr": expr, "step": "30s", "titleFormat": "{{alertname}}",
        "textFormat": "{{severity}} {{switch}} {{interface}} {{endpoint}} {{instance}}",
        "tagKeys": "alertname,severity,team", "useValueForTime": False,
    }


BUILTIN_ANNOTATION = {
    "builtIn": 1, "name": "Annotations & Alerts", "type": "dashboard", "enable": True, "hide": True,
    "iconColor": "rgba(0, 211, 255, 1)",
    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
    "target": {"limit": 100, "matchAny": False, "tags": [], "type": "dashboard"},
}


# -- dashboard -------------------------------------------------------------------------------

@dataclass
class Dashboard:
    uid: str
    title: str
    description: str
    tags: list[str]
    variables: list[dict]
    panels: list[dict]
    annotations: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "annotations": {"list": [BUILTIN_ANNOTATION, *self.annotations]},
            "description": self.description,
            "editable": False,
            "fiscalYearStartMonth": 0,
            "graphTooltip": 1,
            "id": None,
            "links": [{
                "type": "dashboards", "title": "infrapulse", "tags": ["infrapulse"], "asDropdown": True,
                "includeVars": True, "keepTime": True, "icon": "external link", "targetBlank": False,
            }],
            "panels": _layout(self.panels),
            "refresh": "30s",
            "schemaVersion": SCHEMA_VERSION,
            "tags": ["infrapulse", *self.tags],
            "templating": {"list": [datasource_variable(), *self.variables]},
            "time": {"from": "now-1h", "to": "now"},
            "timepicker": {},
            "timezone": "browser",
            "title": self.title,
            "uid": self.uid,
            "version": 1,
        }
