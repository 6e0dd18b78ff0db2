"""Every dashboard query, run against a real Prometheus scraping `infrapulse demo`, returns data.

The stack is scripts/demo_stack.py (the same one `make demo` runs): the demo daemon as a
subprocess, Debian's Prometheus on loopback scraping it every second with the repo's recording
and alert rules. The demo's anomaly scenarios are switched on over its HTTP API so that
event-driven series (XIDs, throttling, PFC storms) exist. Grafana's variables are substituted
the way Grafana would: multi-value variables by their "All" value, single-value ones by the
first value Prometheus knows, `$__rate_interval` by 1m.

Queries that cannot return data in a ~40 s demo run are listed in EXPECTED_NO_DATA with the
reason; the test fails if one of them starts returning data, so the list cannot go stale.
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

from dashboard_model import ROOT, Query, load_dashboards, queries, variable_query

sys.path.insert(0, str(ROOT / "scripts"))
from demo_stack import PROMETHEUS, Stack, http_get  # noqa: E402

SCENARIOS = ("pfc-storm", "ecn-spike", "link-flap", "ttft-surge", "xid", "gpu-thermal")
DEADLINE_SECONDS = 45
GRAFANA_INTERVALS = {"__rate_interval": "1m", "__interval": "15s", "__range": "1h"}

# (dashboard uid, panel title, refId) -> why Prometheus has no data for it in the demo run.
FIRING_NEEDS_FOR = ("every infrapulse alert has a `for:` of 1m or more, so nothing fires within the "
                    "run; the same selector with alertstate=\"pending\" is checked to return data")
EXPECTED_NO_DATA: dict[tuple[str, str, str], str] = {
    ("infrapulse-overview", "annotation Critical alerts", "-"): FIRING_NEEDS_FOR,
    ("infrapulse-fabric", "annotation Network alerts", "-"): FIRING_NEEDS_FOR,
    ("infrapulse-serving", "annotation Serving alerts", "-"): FIRING_NEEDS_FOR,
    ("infrapulse-gpu", "annotation GPU alerts", "-"): FIRING_NEEDS_FOR,
    ("infrapulse-correlation", "annotation Network alerts", "-"): FIRING_NEEDS_FOR,
    ("infrapulse-correlation", "annotation Serving alerts", "-"): FIRING_NEEDS_FOR,
}

def prom_query(base: str, expr: str) -> list:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    body = json.loads(http_get(url, timeout=5))
    assert body["status"] == "success", body
    return body["data"]["result"]


def label_values(base: str, query: str) -> list[str]:
    """Evaluate a Grafana `label_values(selector, label)` variable query against Prometheus."""
    m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query, re.S)
    assert m, f"unsupported variable query {query!r}"
    selector, label = m.groups()
    url = f"{base}/api/v1/label/{label}/values?" + urllib.parse.urlencode({"match[]": selector})
    return json.loads(http_get(url, timeout=5))["data"]


def substitute(expr: str, values: dict[str, str]) -> str:
    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        return values.get(name, m.group(0))  # unknown, e.g. label_replace's "$1", stays as it is

    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", sub, expr)


def variable_values(base: str, board: dict) -> dict[str, str]:
    values = dict(GRAFANA_INTERVALS)
    for variable in board["templating"]["list"]:
        if variable["type"] != "query":
            continue
        if variable.get("includeAll"):
            values[variable["name"]] = variable["allValue"]
        else:
            found = label_values(base, substitute(variable_query(variable), values))
            # Grafana puts a single value in as it is (regex escaping applies to multi-value only).
            values[variable["name"]] = found[0] if found else "no-value-for-" + variable["name"]
    return values


@pytest.fixture(scope="module")
def stack():
    assert Path(PROMETHEUS).exists(), "needs Debian prometheus (scripts/system-deps.sh installs it)"
    with Stack(scrape_interval="1s", evaluation_interval="1s", demo_interval="1s",
               with_alertmanager=False) as running:
        known = running.known_scenarios()
        for name in SCENARIOS:
            if name in known:
                running.set_scenario(name, True)
        yield running


@pytest.fixture(scope="module")
def results(stack) -> dict[Query, list]:
    """Poll every query until all of them have data or the deadline passes; the last answers."""
    boards = load_dashboards()
    answers: dict[Query, list] = {}
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        pending = 0
        for board in boards.values():
            values = variable_values(stack.prometheus_url, board)
            for query in queries(board):
                if answers.get(query):
                    continue
                answers[query] = prom_query(stack.prometheus_url, substitute(query.expr, values))
                expected_gap = (query.dashboard, query.panel, query.ref) in EXPECTED_NO_DATA
                pending += not answers[query] and not expected_gap
        if not pending or time.monotonic() > deadline:
            return answers
        assert stack.alive() == ["infrapulse", "prometheus"], stack.log_tails()
        time.sleep(2)


def test_every_panel_query_returns_data(results):
    empty = [str(q) for q, answer in results.items()
             if not answer and (q.dashboard, q.panel, q.ref) not in EXPECTED_NO_DATA]
    assert not empty, "queries without data in the demo:\n  " + "\n  ".join(empty)


def test_expected_gaps_are_still_gaps(results):
    by_key = {(q.dashboard, q.panel, q.ref): answer for q, answer in results.items()}
    assert set(EXPECTED_NO_DATA) <= set(by_key), "EXPECTED_NO_DATA names a query that no longer exists"
    now_with_data = [key for key in EXPECTED_NO_DATA if by_key[key]]
    assert not now_with_data, f"these return data now; drop them from EXPECTED_NO_DATA: {now_with_data}"


def test_alert_annotation_selectors_match_pending_alerts(stack, results):
    """The annotations' label filters (team, severity) match real alerts once they are pending."""
    annotations = {q.expr for q in results if q.panel.startswith("annotation")}
    missing = []
    for expr in sorted(annotations):
        pending = expr.replace('alertstate="firing"', 'alertstate=~"pending|firing"')
        deadline = time.monotonic() + 20
        while not prom_query(stack.prometheus_url, pending) and time.monotonic() < deadline:
            time.sleep(1)
        if not prom_query(stack.prometheus_url, pending):
            missing.append(expr)
    assert not missing, f"no pending or firing alert matches: {missing}"


def test_variables_resolve_to_demo_values(stack):
    """The single-value node variable of the correlation dashboard finds the demo's host."""
    board = load_dashboards()["infrapulse-correlation"]
    values = variable_values(stack.prometheus_url, board)
    assert values["node"] == "gpu-node-01"
