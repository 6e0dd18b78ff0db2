"""Reading the committed Grafana dashboards for tests: their queries, variables and PromQL trees."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import promql_parser

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD_DIR = ROOT / "dashboards"

# Grafana's interval variables become distinctive durations, so a parsed tree still tells which
# range came from which variable (the way dashboard-linter expands them).
RATE_INTERVAL_MAGIC = timedelta(seconds=7777)
INTERVAL_MAGIC = {
    "$__rate_interval": "7777s",
    "${__rate_interval}": "7777s",
    "$__interval": "7778s",
    "$__range": "7779s",
}
VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")


def load_dashboards() -> dict[str, dict]:
    """uid -> dashboard JSON for every dashboards/*.json."""
    boards = {}
    for path in sorted(DASHBOARD_DIR.glob("*.json")):
        board = json.loads(path.read_text(encoding="utf-8"))
        boards[board["uid"]] = board
    return boards


def query_panels(board: dict) -> Iterator[dict]:
    """Every panel that runs queries (rows only group panels), including panels nested in rows."""
    for panel in board["panels"]:
        if panel["type"] == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


@dataclass(frozen=True)
class Query:
    dashboard: str
    panel: str
    ref: str
    expr: str
    instant: bool

    def __str__(self) -> str:
        return f"{self.dashboard} / {self.panel} / {self.ref}"


def queries(board: dict) -> Iterator[Query]:
    """Panel targets plus annotation queries of one dashboard."""
    for panel in query_panels(board):
        for t in panel.get("targets", []):
            yield Query(board["uid"], panel["title"], t.get("refId", "?"), t.get("expr", ""),
                        bool(t.get("instant")))
    for ann in board.get("annotations", {}).get("list", []):
        if ann.get("expr"):
            yield Query(board["uid"], f"annotation {ann['name']}", "-", ann["expr"], False)


def variable_query(variable: dict) -> str:
    query = variable.get("query", "")
    return query.get("query", "") if isinstance(query, dict) else query


def expand(expr: str, values: dict[str, str] | None = None) -> str:
    """Substitute Grafana variables: intervals by magic durations, the rest from `values`.

    Unknown names (e.g. `$1` in label_replace) are left alone, as Grafana does.
    """
    for name, duration in INTERVAL_MAGIC.items():
        expr = expr.replace(name, duration)
    if values:
        def sub(m: re.Match) -> str:
            name = m.group(1) or m.group(2)
            return values.get(name, m.group(0))

        expr = VARIABLE.sub(sub, expr)
    return expr


def parse(expr: str):
    return promql_parser.parse(expand(expr))


def children(node) -> list:
    if isinstance(node, promql_parser.AggregateExpr):
        return [c for c in (node.expr, node.param) if c is not None]
    if isinstance(node, promql_parser.BinaryExpr):
        return [node.lhs, node.rhs]
    if isinstance(node, promql_parser.Call):
        return list(node.args)
    if isinstance(node, promql_parser.MatrixSelector):
        return [node.vector_selector]
    if isinstance(node, (promql_parser.ParenExpr, promql_parser.UnaryExpr, promql_parser.SubqueryExpr)):
        return [node.expr]
    return []


def walk(node, parents: tuple = ()) -> Iterator[tuple[object, tuple]]:
    """Depth-first (node, ancestors) pairs, the innermost ancestor last."""
    yield node, parents
    for child in children(node):
        yield from walk(child, (*parents, node))


def selectors(node) -> Iterator[tuple[object, tuple]]:
    for n, parents in walk(node):
        if isinstance(n, promql_parser.VectorSelector):
            yield n, parents


def matchers(selector) -> dict[str, tuple[str, str]]:
    """label -> (operator, value) of a vector selector."""
    ops = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}
    out = {}
    for m in selector.matchers.matchers:
        out[m.name] = (ops.get(str(m.op).rsplit(".", 1)[-1], str(m.op)), m.value)
    return out
