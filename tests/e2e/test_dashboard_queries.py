"""Every dashboard query, run against a real Prometheus scraping `infrapulse demo`, returns data.

The stack is scripts/demo_stack.py (the same one `make demo` runs): the demo daemon as a
subprocess, Debian's Prometheus on loopback scraping it every second with the repo's recording
and alert rules. The demo's anomaly scenarios are switched on over its HTTP API so that
event-driven series (XIDs, throttling, PFC storms) exist. Grafana's variables are substituted
the way Grafana would: multi-value variables by their "All" value, single-value ones by the
first value Prometheus knows, `$__rate_interval` by 1m.

Alert annotations select firing alerts; every infrapulse alert has a `for:` duration, so in a
short run an alert may still be pending. Their queries are run with alertstate pending or
firing: the label filters (team, severity) must match real alerts either way.
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from dashboard_model import ROOT, Query, load_dashboards, queries, variable_query

sys.path.insert(0, str(ROOT / "scripts"))
from demo_stack import PROMETHEUS, Stack, http_get  # noqa: E402

SCENARIOS = ("pfc-storm", "ecn-spike", "link-flap", "ttft-surge", "xid", "gpu-thermal",
             "fw-upgrade-regression")
DEADLINE_SECONDS = 45
GRAFANA_INTERVALS = {"__rate_interval": "1m", "__interval": "15s", "__range": "1h"}

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
        # One inspection on demand (the demo allows it unauthenticated) for the inspection panels.
        req = urllib.request.Request(running.exporter_url + "/api/v1/inspections", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.status == 200
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
                expr = substitute(query.expr, values).replace('alertstate="firing"',
                                                              'alertstate=~"pending|firing"')
                answers[query] = prom_query(stack.prometheus_url, expr)
                pending += not answers[query]
        if not pending or time.monotonic() > deadline:
            return answers
        assert stack.alive() == ["infrapulse", "prometheus"], stack.log_tails()
        time.sleep(2)


def test_every_panel_query_returns_data(results):
    empty = [str(q) for q, answer in results.items() if not answer]
    assert not empty, "queries without data in the demo:\n  " + "\n  ".join(empty)
    assert len(results) >= 100  # every panel of the five dashboards was queried


def test_correlation_join_finds_the_switch_ports_of_the_node(results):
    """The LLDP join finds the demo node's ports on several switches, and the ECN and PFC series
    on the correlation panel come from exactly those ports."""
    def answer(panel: str, ref: str) -> list:
        return next(a for q, a in results.items()
                    if q.dashboard == "infrapulse-correlation" and q.panel == panel and q.ref == ref)

    ports = answer("Switch ports serving $node", "A")
    assert {row["metric"]["hostname"] for row in ports} == {"gpu-node-01"}
    assert all(row["metric"]["neighbor_system"] == "gpu-node-01" and row["metric"]["neighbor_port"]
               for row in ports)
    facing = {(row["metric"]["switch"], row["metric"]["interface"]) for row in ports}
    assert len({switch for switch, _ in facing}) >= 2
    for ref in ("B", "C"):  # ECN-marked ratio, PFC pause-time ratio
        series = answer("TTFT p95 vs congestion on the switch ports serving $node", ref)
        assert {(row["metric"]["switch"], row["metric"]["interface"]) for row in series} <= facing


def test_variables_resolve_to_demo_values(stack, results):
    """The single-value node variable of the correlation dashboard finds the demo's host (once
    `results` has waited for Prometheus to hold data)."""
    board = load_dashboards()["infrapulse-correlation"]
    values = variable_values(stack.prometheus_url, board)
    assert values["node"] == "gpu-node-01"
