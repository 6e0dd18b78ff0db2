"""The Grafana dashboards without a Grafana server: drift, structure, and dashboard-linter's rules.

grafana/dashboard-linter is a Go binary; its rules are re-implemented here over the committed
JSON (rule names kept, so a reader can compare). Exclusions, like the linter's `.lint` file,
name the rule, the dashboard and the reason.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import promql_parser
import pytest
import yaml

from dashboard_model import (
    DASHBOARD_DIR,
    RATE_INTERVAL_MAGIC,
    ROOT,
    load_dashboards,
    matchers,
    parse,
    queries,
    query_panels,
    selectors,
    variable_query,
)

EXPECTED_UIDS = {"infrapulse-overview", "infrapulse-fabric", "infrapulse-serving", "infrapulse-gpu",
                 "infrapulse-correlation", "infrapulse-baselines"}
BOARDS = load_dashboards()
ALL_QUERIES = [q for board in BOARDS.values() for q in queries(board)]

# Units dashboard-linter accepts (its list is Grafana's valueFormats categories).
VALID_UNITS = {
    "none", "string", "short", "percent", "percentunit", "hex0x", "hex", "sci", "locale",
    "bytes", "decbytes", "bits", "decbits", "kbytes", "mbytes", "gbytes",
    "pps", "binBps", "Bps", "binbps", "bps", "KiBs", "MiBs", "GiBs", "Gbits", "Mbits",
    "dateTimeAsIso", "dateTimeFromNow", "watt", "kwatt", "joule", "watth", "kwatth", "celsius",
    "hertz", "ns", "µs", "ms", "s", "m", "h", "d", "dtdurations", "dtdurationms",
    "cps", "ops", "reqps", "rps", "wps", "iops", "cpm", "opm", "rpm", "wpm", "bool", "bool_yes_no",
    "bool_on_off",
}
COUNTER_SUFFIXES = ("_total", "_bucket", "_count", "_sum")
RANGE_FUNCTIONS = {"rate", "irate", "increase"}

# Rule exclusions: (rule, dashboard uid) -> reason.
EXCLUSIONS = {
    ("template-instance-rule", "infrapulse-correlation"):
        "joins a node's instances with the fabric collectors' instances through LLDP; an instance "
        "variable would cut the join. The node variable selects the host instead.",
    ("target-instance-rule", "infrapulse-correlation"): "same reason as template-instance-rule",
}
# Queries over Prometheus's own ALERTS series: alerts aggregated across instances carry no
# job/instance label, so those matchers would hide them.
ALERTS_SELECTOR = "ALERTS"
# Recording rules aggregated above the instance (level `role:` or `cluster:`) have no job/instance.
CLUSTER_LEVELS = ("role", "cluster")


def instance_level(name: str) -> bool:
    """Whether series of this name carry job and instance labels that panels can filter on."""
    if name == ALERTS_SELECTOR:
        return False
    return not (":" in name and name.split(":", 1)[0] in CLUSTER_LEVELS)


def excluded(rule: str, uid: str) -> bool:
    return (rule, uid) in EXCLUSIONS


def board_ids():
    return sorted(BOARDS)


def _load_generator():
    spec = importlib.util.spec_from_file_location("dashboards_generate", DASHBOARD_DIR / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- one source of truth ---------------------------------------------------------------------

def test_committed_json_equals_generator_output():
    rendered = _load_generator().render()
    committed = {p.name: p.read_text(encoding="utf-8") for p in DASHBOARD_DIR.glob("*.json")}
    assert sorted(committed) == sorted(rendered), "stale or missing dashboard files"
    drifted = [name for name, text in rendered.items() if committed[name] != text]
    assert not drifted, f"run `python dashboards/generate.py`: {drifted} drifted from the generator"


def test_generator_check_mode_detects_drift(tmp_path: Path):
    gen = _load_generator()
    assert gen.main(["--out", str(tmp_path)]) == 0
    assert gen.main(["--check", "--out", str(tmp_path)]) == 0
    victim = tmp_path / "infrapulse-gpu.json"
    victim.write_text(victim.read_text().replace('"GPU healthy"', '"GPU ok"'))
    assert gen.main(["--check", "--out", str(tmp_path)]) == 1


# -- structure -------------------------------------------------------------------------------

def test_expected_dashboards_with_stable_unique_uids_and_titles():
    assert set(BOARDS) == EXPECTED_UIDS
    titles = [b["title"] for b in BOARDS.values()]
    assert len(set(titles)) == len(titles)
    for uid, board in BOARDS.items():
        assert 8 <= len(uid) <= 40 and re.fullmatch(r"[a-z0-9-]+", uid)
        assert board["id"] is None, "ids are assigned by Grafana's database"
        assert board["schemaVersion"] == 41
        assert board["description"] and "infrapulse" in board["tags"]


@pytest.mark.parametrize("uid", board_ids())
def test_panel_layout_ids_and_grid(uid):
    board = BOARDS[uid]
    ids = [p["id"] for p in board["panels"]]
    assert len(set(ids)) == len(ids)
    cells: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["w"] > 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        covered = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"])
                   for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not covered & cells, f"{uid}: panel {panel['title']!r} overlaps another"
        cells |= covered


@pytest.mark.parametrize("uid", board_ids())
def test_every_panel_has_unit_description_and_targets(uid):
    for panel in query_panels(BOARDS[uid]):
        name = f"{uid} / {panel['title']}"
        assert panel["title"] and panel["description"], name
        assert panel["fieldConfig"]["defaults"].get("unit") in VALID_UNITS, name
        for override in panel["fieldConfig"].get("overrides", []):
            for prop in override["properties"]:
                if prop["id"] == "unit":
                    assert prop["value"] in VALID_UNITS, name
        assert panel.get("targets"), f"{name} has no targets"
        for t in panel["targets"]:
            assert t["expr"].strip(), f"{name} has an empty target"
            assert t["refId"]


@pytest.mark.parametrize("uid", board_ids())
def test_datasource_variable_used_everywhere(uid):
    board = BOARDS[uid]
    templated = "${datasource}"
    for panel in query_panels(board):
        assert panel["datasource"] == {"type": "prometheus", "uid": templated}, panel["title"]
        for t in panel["targets"]:
            assert t["datasource"]["uid"] == templated, panel["title"]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            assert variable["datasource"]["uid"] == templated, variable["name"]
    for ann in board["annotations"]["list"]:
        if not ann.get("builtIn"):
            assert ann["datasource"]["uid"] == templated, ann["name"]


def test_correlation_dashboard_puts_latency_and_fabric_on_two_axes():
    board = BOARDS["infrapulse-correlation"]
    panel = next(p for p in query_panels(board) if p["title"].startswith("TTFT p95 vs"))
    exprs = {t["refId"]: t["expr"] for t in panel["targets"]}
    assert "infrapulse_llm_time_to_first_token_seconds_bucket" in exprs["A"]
    assert "infrapulse_switch_queue_ecn_marked_packets_total" in exprs["B"]
    assert "infrapulse_switch_pfc_pause_duration_seconds_total" in exprs["C"]
    assert panel["fieldConfig"]["defaults"]["unit"] == "s"
    right = {o["matcher"]["options"]: {p["id"]: p["value"] for p in o["properties"]}
             for o in panel["fieldConfig"]["overrides"]}
    for ref in ("B", "C"):
        assert right[ref] == {"custom.axisPlacement": "right", "unit": "percentunit"}
    # The LLDP join: neighbor_system is matched to node_info's hostname, on both fabric queries.
    for ref in ("B", "C"):
        assert '"hostname", "$1", "neighbor_system"' in exprs[ref]
        assert "infrapulse_switch_lldp_neighbor_info" in exprs[ref] and "infrapulse_node_info" in exprs[ref]
    alert_annotations = [a for a in board["annotations"]["list"] if "ALERTS" in a.get("expr", "")]
    assert {a["name"] for a in alert_annotations} == {"Network alerts", "Serving alerts"}


# -- dashboard-linter rules ------------------------------------------------------------------

@pytest.mark.parametrize("uid", board_ids())
def test_uneditable_dashboard_rule(uid):
    assert BOARDS[uid]["editable"] is False


@pytest.mark.parametrize("uid", board_ids())
def test_template_datasource_rule(uid):
    datasources = [v for v in BOARDS[uid]["templating"]["list"] if v["type"] == "datasource"]
    assert len(datasources) == 1
    (ds,) = datasources
    assert (ds["name"], ds["label"], ds["query"]) == ("datasource", "Data source", "prometheus")


@pytest.mark.parametrize("rule,name", [("template-job-rule", "job"), ("template-instance-rule", "instance")])
@pytest.mark.parametrize("uid", board_ids())
def test_template_job_and_instance_rules(uid, rule, name):
    if excluded(rule, uid):
        return
    variables = {v["name"]: v for v in BOARDS[uid]["templating"]["list"]}
    assert name in variables, f"{uid} is missing the {name} template"
    v = variables[name]
    assert v["datasource"]["uid"] in ("$datasource", "${datasource}")
    assert v["type"] == "query"
    assert v["label"] == name.title()
    assert v["multi"] is True and v["allValue"] == ".+"


LABEL_FUNCTION = re.compile(r"^([a-z_]+)\((.*)\)$", re.S)


@pytest.mark.parametrize("uid", board_ids())
def test_template_label_promql_rule(uid):
    for variable in BOARDS[uid]["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable_query(variable)
        m = LABEL_FUNCTION.match(query)
        assert m, f"{variable['name']}: invalid query {query!r}"
        function, argument = m.groups()
        assert function in ("label_names", "label_values", "metrics", "query_result"), function
        if function == "label_values":
            metric, _, label = argument.rpartition(",")
            assert re.fullmatch(r"\s*[a-zA-Z_]\w*\s*", label), f"{variable['name']}: bad label {label!r}"
            parse(metric)
        elif function == "query_result":
            parse(argument)


@pytest.mark.parametrize("uid", board_ids())
def test_template_on_time_change_reload_rule(uid):
    for variable in BOARDS[uid]["templating"]["list"]:
        if variable["type"] == "query":
            assert variable["refresh"] == 2, variable["name"]


@pytest.mark.parametrize("uid", board_ids())
def test_template_unused_rule(uid):
    board = BOARDS[uid]
    exprs = "\n".join(q.expr for q in queries(board))
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            used = re.search(rf"\$({variable['name']})\b|\$\{{{variable['name']}(:[^}}]+)?\}}", exprs)
            assert used, f"{uid}: variable {variable['name']} is not used in any query"


@pytest.mark.parametrize("uid", board_ids())
def test_panel_datasource_and_no_targets_rules(uid):
    for panel in query_panels(BOARDS[uid]):
        assert panel["datasource"]["uid"] in ("$datasource", "${datasource}")
        assert panel["targets"]


@pytest.mark.parametrize("query", ALL_QUERIES, ids=str)
def test_target_promql_rule(query):
    """Every query parses (after Grafana's variables are expanded)."""
    assert parse(query.expr) is not None


def _range_call(parents: tuple):
    """The function a selector is the range argument of, or None."""
    if len(parents) >= 2 and isinstance(parents[-1], promql_parser.MatrixSelector) \
            and isinstance(parents[-2], promql_parser.Call):
        return parents[-2].func.name
    return None


@pytest.mark.parametrize("query", ALL_QUERIES, ids=str)
def test_target_counter_agg_rule(query):
    """Counters (_total) and histogram series (_bucket/_count/_sum) only inside rate/irate/increase."""
    for selector, parents in selectors(parse(query.expr)):
        if (selector.name or "").endswith(COUNTER_SUFFIXES):
            assert _range_call(parents) in RANGE_FUNCTIONS, f"{query}: raw counter {selector.name}"


@pytest.mark.parametrize("query", ALL_QUERIES, ids=str)
def test_target_histogram_rule(query):
    for selector, parents in selectors(parse(query.expr)):
        if (selector.name or "").endswith("_bucket"):
            calls = [p.func.name for p in parents if isinstance(p, promql_parser.Call)]
            assert "histogram_quantile" in calls, f"{query}: {selector.name} outside histogram_quantile"


@pytest.mark.parametrize("query", ALL_QUERIES, ids=str)
def test_target_rate_interval_rule(query):
    from dashboard_model import walk

    for node, parents in walk(parse(query.expr)):
        if isinstance(node, promql_parser.MatrixSelector) and parents \
                and isinstance(parents[-1], promql_parser.Call) \
                and parents[-1].func.name in ("rate", "irate"):
            assert node.range == RATE_INTERVAL_MAGIC, f"{query}: rate() should use $__rate_interval"


@pytest.mark.parametrize("rule,label", [("target-job-rule", "job"), ("target-instance-rule", "instance")])
@pytest.mark.parametrize("query", ALL_QUERIES, ids=str)
def test_target_job_and_instance_rules(query, rule, label):
    if excluded(rule, query.dashboard):
        return
    for selector, _ in selectors(parse(query.expr)):
        if not instance_level(selector.name):
            continue
        assert matchers(selector).get(label) == ("=~", f"${label}"), \
            f"{query}: {selector.name} lacks {label}=~\"${label}\""


def test_exclusions_are_still_needed():
    """An exclusion whose rule would now pass is stale and must go (mirrors the linter's .lint hygiene)."""
    for rule, uid in EXCLUSIONS:
        board = BOARDS[uid]
        if rule == "template-instance-rule":
            assert "instance" not in {v["name"] for v in board["templating"]["list"]}
        if rule == "target-instance-rule":
            assert any(matchers(s).get("instance") is None
                       for q in queries(board) for s, _ in selectors(parse(q.expr))
                       if s.name != ALERTS_SELECTOR)


def recorded_names() -> set[str]:
    names = set()
    for path in sorted((ROOT / "alerts").glob("*.rules.yaml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            names |= {rule["record"] for rule in group["rules"] if "record" in rule}
    return names


def test_recording_rules_used_by_panels_exist():
    """A panel reading a recording rule shows nothing if the rule is renamed: the name must exist."""
    recorded = recorded_names()
    used = {s.name for q in ALL_QUERIES for s, _ in selectors(parse(q.expr)) if ":" in (s.name or "")}
    assert used, "the dashboards are expected to reuse the recording rules"
    assert used <= recorded, \
        f"panels use recording rules that alerts/ does not define: {sorted(used - recorded)}"


def catalog_families() -> dict:
    from infrapulse import catalog, docs

    docs.load_everything()
    return {f.name: f for f in catalog.all_families()}


HISTOGRAM_SERIES = ("_bucket", "_count", "_sum")


def _family_of(name: str, families: dict):
    """The catalog family a series name belongs to (histograms expose _bucket/_count/_sum)."""
    if name in families:
        return families[name]
    for suffix in HISTOGRAM_SERIES:
        family = families.get(name.removesuffix(suffix))
        if name.endswith(suffix) and family is not None and family.type == "histogram":
            return family
    return None


def test_panels_read_declared_families_with_their_labels():
    """Every infrapulse_* series a panel reads is in the catalog, matched only on labels it has."""
    families = catalog_families()
    problems = []
    for query in ALL_QUERIES:
        for selector, _ in selectors(parse(query.expr)):
            if not (selector.name or "").startswith("infrapulse_"):
                continue
            family = _family_of(selector.name, families)
            if family is None:
                problems.append(f"{query}: unknown family {selector.name}")
                continue
            allowed = {*family.labels, *family.optional_labels, "job", "instance"}
            if selector.name.endswith("_bucket"):
                allowed.add("le")
            for label in set(matchers(selector)) - allowed:
                problems.append(f"{query}: {selector.name} has no label {label!r}")
    assert not problems, "\n".join(problems)


def test_rate_and_increase_only_over_counters():
    """The other half of the counter rule: never rate() a gauge (per the catalog's types)."""
    families = catalog_families()
    for query in ALL_QUERIES:
        for selector, parents in selectors(parse(query.expr)):
            family = _family_of(selector.name or "", families)
            if family is not None and _range_call(parents) in RANGE_FUNCTIONS:
                assert family.type in ("counter", "histogram"), \
                    f"{query}: rate() over {family.type} {family.name}"


# -- the linter re-implementation itself can fail --------------------------------------------

@pytest.mark.parametrize("expr,ok", [
    ('sum(rate(x_total{job=~"$job"}[$__rate_interval]))', True),
    ('sum(x_total{job=~"$job"})', False),
    ('histogram_quantile(0.9, sum by (le) (rate(h_bucket[$__rate_interval])))', True),
    ('sum(h_count)', False),
    ('delta(x_total[5m])', False),
    ('increase(x_total[10m])', True),
])
def test_counter_rule_catches_raw_counters(expr, ok):
    offending = [s.name for s, parents in selectors(parse(expr))
                 if s.name.endswith(COUNTER_SUFFIXES) and _range_call(parents) not in RANGE_FUNCTIONS]
    assert (not offending) == ok


def test_rate_interval_magic_detects_fixed_windows():
    (node,) = [n for n, _ in __import__("dashboard_model").walk(parse("rate(x_total[5m])"))
               if isinstance(n, promql_parser.MatrixSelector)]
    assert node.range != RATE_INTERVAL_MAGIC
