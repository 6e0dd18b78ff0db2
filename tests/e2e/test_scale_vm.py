"""The scale path with the real parts: sharded Prometheus servers remote-writing to VictoriaMetrics,
rules in vmalert, dashboards read from VictoriaMetrics, and what a crash of each part leaves.

The stack (all Debian binaries on loopback, see vm_stack.py and scale_cluster.py):

- three node daemons (gpu-node-01..03, in one process with their simulators) and two fabric
  collectors (`infrapulse run`, shards 0/2 and 1/2 of the four simulated gNMI switches);
- two Prometheus servers running deploy/prometheus/remote-write/victoriametrics.yml (loopback
  targets, 2 s interval): each keeps its half of both jobs with `hashmod` on __address__, shard 0
  in agent mode, shard 1 a server; both remote-write everything to one VictoriaMetrics, with the
  example's external labels (cluster, prometheus="shard-<i>");
- vmalert evaluating alerts/*.rules.yaml unchanged against VictoriaMetrics, writing the recording
  rules and ALERTS back into it;
- a second vmalert with the alerts that the crash tests expect (health and sharding rules) in a
  time-compressed copy (alerting_stack.compressed_rules: `for` and offsets / 60) notifying a
  recording sink, so an alert with `for: 5m` fires within seconds. It writes nothing back.

Everything scrapes and evaluates every 2 s (1 s for the compressed alerts); the anomaly scenarios
are on from the start so event-driven series (XIDs, throttling, PFC storms) exist. The tests run
in file order: the last two kill a fabric collector and then the agent.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerting_stack import compressed_rules
from conftest import ROOT, free_port, stop_process, wait_http_ready
from dashboard_model import load_dashboards, queries, variable_query
from helpers import parse_exposition
from infrapulse.sources.gnmi.shard import shard_of
from test_dashboard_queries import SCENARIOS, label_values, prom_query, substitute, variable_values
from vm_stack import (
    PROMETHEUS,
    VICTORIA_METRICS,
    VMALERT,
    Labels,
    NotifierSink,
    PrometheusShard,
    Service,
    VictoriaMetrics,
    Vmalert,
    hashmod_shard,
    http_json,
    shard_config,
)

# Tens of processes on a 2-core machine: make e2e runs this file after its lane's other files.
pytestmark = pytest.mark.heavy

NODES = 3
SHARDS = 2  # Prometheus shards, and fabric collector shards
INTERVAL = 2.0
NODE_JOB, FABRIC_JOB = "infrapulse-node", "infrapulse-fabric"
FABRIC_SERIES = 4000  # fewer than the simulated fabric exposes once every switch streams
# Every collector's sessions up, every switch streaming: seconds on an idle machine, longer on a
# loaded one (a bound on waiting, not a figure the test asserts).
FABRIC_UP_TIMEOUT = 180.0
# Series Prometheus adds to every target's own.
SCRAPE_SERIES = ("up", "scrape_duration_seconds", "scrape_samples_scraped",
                 "scrape_samples_post_metric_relabeling", "scrape_series_added")
# What vmalert writes back: recording rules (level:metric:operations) and alert state.
NOT_SCRAPED = "ALERTS|ALERTS_FOR_STATE|.+:.+"
# The probe panels need a firmware change after three probe rounds (fw-upgrade-regression) and
# a 2 s remote-write + vmalert round trip: minutes on a loaded 2-core machine.
DASHBOARD_DEADLINE = 240.0
# Recording rules over a counter that appears only once its event happened: a link recovery
# without carrier loss (half-dead-link) is not among this stack's scenarios, and link-flap, which
# is, moves the carrier of the one port that could recover.
NO_EVENT_HERE = {"instance_interface:infrapulse_nic_link_recoveries_without_carrier_loss:increase10m"}
# The Prometheus shards run this example, with loopback targets and a 2 s interval.
REMOTE_WRITE_EXAMPLE = ROOT / "deploy" / "prometheus" / "remote-write" / "victoriametrics.yml"


class FabricCollector(Service):
    """`infrapulse run` with one of the fabric shard configs scale_cluster.py wrote."""

    def __init__(self, workdir: Path, index: int, config: str, port: int) -> None:
        super().__init__(f"fabric-{index}", workdir, "/healthz", port)
        self.index, self.config = index, config
        self.address = f"127.0.0.1:{port}"

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "infrapulse", "run", "--config", self.config, "--listen", self.address,
                "--log-level", "warning"]

    def env(self) -> dict[str, str]:
        path = os.pathsep.join(p for p in (str(ROOT / "exporter"), os.environ.get("PYTHONPATH", "")) if p)
        return {**os.environ, "PYTHONPATH": path}


def pick_addresses() -> tuple[list[str], list[str]]:
    """Loopback ports for the nodes and the fabric collectors such that hashmod gives each
    Prometheus shard some nodes and exactly one fabric collector."""
    for _ in range(1000):
        nodes = [f"127.0.0.1:{free_port()}" for _ in range(NODES)]
        fabric = [f"127.0.0.1:{free_port()}" for _ in range(SHARDS)]
        if len(set(nodes + fabric)) < NODES + SHARDS:
            continue
        if ({hashmod_shard(a, SHARDS) for a in nodes} == set(range(SHARDS))
                and sorted(hashmod_shard(a, SHARDS) for a in fabric) == list(range(SHARDS))):
            return nodes, fabric
    raise AssertionError("no port choice splits the targets over both shards")


class ScaleStack:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.node_addresses, self.fabric_addresses = pick_addresses()
        self.jobs = {NODE_JOB: self.node_addresses, FABRIC_JOB: self.fabric_addresses}
        self.cluster: subprocess.Popen[bytes] | None = None
        self.services: list[Service] = []
        self.sinks: list[NotifierSink] = []

    # -- what hashmod decides ------------------------------------------------------------------

    def shard_of_target(self, address: str) -> int:
        return hashmod_shard(address, SHARDS)

    def targets_of(self, shard: int) -> set[tuple[str, str]]:
        return {(job, a) for job, addresses in self.jobs.items() for a in addresses
                if self.shard_of_target(a) == shard}

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        cluster_dir = self.workdir / "cluster"
        cluster_dir.mkdir()
        argv = [sys.executable, str(ROOT / "tests" / "e2e" / "scale_cluster.py"), "--workdir",
                str(cluster_dir), "--interval", f"{INTERVAL:g}s", "--fabric-shards", str(SHARDS)]
        for address in self.node_addresses:
            argv += ["--node-port", address.rsplit(":", 1)[1]]
        log_path = self.workdir / "cluster.log"
        with open(log_path, "wb") as log:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT / "exporter"), os.environ.get("PYTHONPATH", "")) if p)}
            self.cluster = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        description = self._wait_file(cluster_dir / "cluster.json", log_path)
        for url in description["nodes"].values():
            wait_http_ready(url + "/healthz", self.cluster, log_path, "node daemon")
        self.switches: list[str] = description["switches"]
        # Switched on once the daemons run, as an operator would: an XID raised before the XID
        # watcher subscribed would be lost.
        scenarios = description["scenarios"]
        for name in SCENARIOS:
            body = json.dumps({"name": name, "active": True}).encode()
            request = urllib.request.Request(scenarios, data=body,
                                             headers={"Content-Type": "application/json"})
            urllib.request.urlopen(request, timeout=10).close()  # noqa: S310 - loopback
        # One inspection on the first node, for the inspection panels and rules: on demand, unless
        # the scenarios' score drop has already started one (409: pending or running), which serves.
        request = urllib.request.Request(next(iter(description["nodes"].values())) + "/api/v1/inspections",
                                         data=b"{}", headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request, timeout=30).close()  # noqa: S310 - loopback
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise
        self.fabric = [FabricCollector(self.workdir, i, config, int(address.rsplit(":", 1)[1]))
                       for i, (config, address) in enumerate(zip(description["fabric_configs"],
                                                                 self.fabric_addresses))]
        for collector in self.fabric:
            self._start(collector)
        self.vm = self._start(VictoriaMetrics(self.workdir))
        self.rules_sink, self.fast_sink = NotifierSink(), NotifierSink()
        self.sinks = [self.rules_sink, self.fast_sink]
        example = yaml.safe_load(REMOTE_WRITE_EXAMPLE.read_text())
        self.prometheus = [self._start(PrometheusShard(
            self.workdir, shard_config(example, i, SHARDS, self.jobs, self.vm.write_url, f"{INTERVAL:g}s"),
            i, agent=(i == 0))) for i in range(SHARDS)]
        self.rule_files = sorted((ROOT / "alerts").glob("*.rules.yaml"))
        self.vmalert = self._start(Vmalert("vmalert", self.workdir, self.rule_files, self.vm.url,
                                           self.rules_sink.url, f"{INTERVAL:g}s", remote_write=self.vm.url))
        fast_dir = self.workdir / "compressed-rules"
        fast_dir.mkdir()
        fast_rules = [p for p in compressed_rules(fast_dir, factor=60, window_floor=10)
                      if p.name in ("health.rules.yaml", "sharding.rules.yaml")]
        # Prometheus' 5m lookback compressed like the rules: a series with no sample for 5 s is gone.
        self.fast_vmalert = self._start(Vmalert("vmalert-compressed", self.workdir, fast_rules, self.vm.url,
                                                self.fast_sink.url, "1s", lookback="5s"))

    def _start(self, service: Any) -> Any:
        self.services.append(service)
        service.start()
        return service

    def _wait_file(self, path: Path, log_path: Path, timeout: float = 120.0) -> dict[str, Any]:
        assert self.cluster is not None
        deadline = time.monotonic() + timeout
        while not path.exists():
            if self.cluster.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the simulated cluster did not start:\n" + log_path.read_text()[-3000:])
            time.sleep(0.3)
        return json.loads(path.read_text())

    def log_tails(self) -> str:
        return "\n".join(s.log_tail() for s in self.services)

    def close(self) -> None:
        for service in reversed(self.services):
            service.stop()
        if self.cluster is not None:
            stop_process(self.cluster)
        for sink in self.sinks:
            sink.close()

    # -- reading ---------------------------------------------------------------------------

    def exposition(self, address: str) -> set[Labels]:
        """The series a daemon exposes, as VictoriaMetrics should hold them: plus job and instance."""
        job = NODE_JOB if address in self.node_addresses else FABRIC_JOB
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as r:  # noqa: S310
            values = parse_exposition(r.read().decode())
        external = self.prometheus[self.shard_of_target(address)].external_labels
        target = {**external, "job": job, "instance": address}
        series = {_labels(name, dict(labels), target) for name, labels in values}
        return series | {_labels(name, {}, target) for name in SCRAPE_SERIES}

    def stored(self, address: str) -> set[Labels]:
        result = self.vm.query(f'{{instance="{address}", __name__!~"{NOT_SCRAPED}"}}')
        return {tuple(sorted(row["metric"].items())) for row in result}


def _labels(name: str, labels: dict[str, str], target: dict[str, str]) -> Labels:
    return tuple(sorted({**{k: v for k, v in labels.items() if v != ""}, **target, "__name__": name}.items()))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):
    for binary, package in ((VICTORIA_METRICS, "victoria-metrics"), (VMALERT, "victoria-metrics"),
                            (PROMETHEUS, "prometheus")):
        assert Path(binary).exists(), f"needs {binary} (Debian {package}; scripts/system-deps.sh installs it)"
    running = ScaleStack(tmp_path_factory.mktemp("scale-vm"))
    try:
        running.start()
        yield running
    except BaseException:
        print(running.log_tails())
        raise
    finally:
        running.close()


# -- sharding ------------------------------------------------------------------------------------

def test_hashmod_gives_every_target_to_exactly_one_prometheus(stack: ScaleStack) -> None:
    everything = {(job, a) for job, addresses in stack.jobs.items() for a in addresses}
    for shard in stack.prometheus:  # discovery hands targets over within about 5 s
        found = _wait(f"{shard.name} targets", shard.active_targets, 30, stack)
        assert found == stack.targets_of(shard.index)
    assert set().union(*(stack.targets_of(i) for i in range(SHARDS))) == everything
    assert all(stack.targets_of(i) for i in range(SHARDS))
    # ...and VictoriaMetrics holds one `up` per target, from the shard hashmod chose, every one 1.
    ups = stack.vm.wait_for('up{job=~"infrapulse-.*"} == 1', lambda r: len(r) == len(everything), timeout=60)
    assert {(r["metric"]["instance"], r["metric"]["prometheus"]) for r in ups} == {
        (a, f"shard-{stack.shard_of_target(a)}") for _, a in everything}


def test_each_fabric_collector_owns_its_hashmod_share_of_the_switches(stack: ScaleStack) -> None:
    result = stack.vm.wait_for("infrapulse_switch_up == 1", lambda r: len(r) == len(stack.switches),
                               timeout=FABRIC_UP_TIMEOUT)
    owner = {r["metric"]["switch"]: r["metric"]["instance"] for r in result}
    assert owner == {s: stack.fabric[shard_of(s, SHARDS)].address for s in stack.switches}
    shards = stack.vm.query("infrapulse_fabric_shards")
    assert {(r["metric"]["instance"], r["metric"]["index"], r["value"][1]) for r in shards} == {
        (c.address, str(c.index), str(SHARDS)) for c in stack.fabric}


# -- dashboards and rules on VictoriaMetrics ------------------------------------------------------

def test_every_dashboard_query_and_variable_returns_data_from_victoriametrics(stack: ScaleStack) -> None:
    boards = load_dashboards()
    answers: dict[Any, list] = {}
    deadline = time.monotonic() + DASHBOARD_DEADLINE
    while True:
        pending = []
        for board in boards.values():
            values = variable_values(stack.vm.url, board)
            for query in queries(board):
                if answers.get(query):
                    continue
                expr = substitute(query.expr, values).replace('alertstate="firing"',
                                                              'alertstate=~"pending|firing"')
                answers[query] = prom_query(stack.vm.url, expr)
                if not answers[query]:
                    pending.append(str(query))
        if not pending or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert not pending, "queries without data in VictoriaMetrics:\n  " + "\n  ".join(pending)
    assert len(answers) >= 100
    empty_variables = []
    for board in boards.values():
        values = variable_values(stack.vm.url, board)
        for variable in board["templating"]["list"]:
            if variable["type"] == "query":
                found = label_values(stack.vm.url, substitute(variable_query(variable), values))
                if not found:
                    empty_variables.append(f"{board['uid']} ${variable['name']}")
    assert not empty_variables
    # The correlation board's node variable resolves to a node of either shard, and its LLDP join
    # crosses shards: the node's switch ports come from the collectors, wherever they are scraped.
    assert variable_values(stack.vm.url, boards["infrapulse-correlation"])["node"] == "gpu-node-01"


def _rule_counts(paths: list[Path]) -> dict[str, int]:
    return {g["name"]: len(g["rules"]) for p in paths for g in yaml.safe_load(p.read_text())["groups"]}


def test_vmalert_evaluates_the_unchanged_rule_files_into_victoriametrics(stack: ScaleStack) -> None:
    loaded = stack.vmalert.groups()
    assert {g["name"]: len(g["rules"]) for g in loaded} == _rule_counts(stack.rule_files)
    errors = [f"{g['name']}/{r['name']}: {r['lastError']}" for g in loaded for r in g["rules"]
              if r.get("lastError")]
    assert not errors
    rules = [r for p in stack.rule_files for g in yaml.safe_load(p.read_text())["groups"]
             for r in g["rules"] if "record" in r]
    # A baseline read with `offset` needs more history than this stack has lived (minutes), and so
    # does every rule that reads one: evaluated without error above, but no result yet.
    young = {r["record"] for r in rules if "offset" in r["expr"]}
    young |= {r["record"] for r in rules if any(name in r["expr"] for name in young)}
    records = sorted({r["record"] for r in rules} - young - NO_EVENT_HERE)
    assert young == {"instance_interface_basis:infrapulse_nic_pre_fec_ber:ratio_rate1h_before10m",
                     "instance_interface:infrapulse_nic_pre_fec_ber_rise:ratio"}, young
    deadline = time.monotonic() + 60
    while True:
        missing = [name for name in records if not stack.vm.query(f'count({{__name__="{name}"}})')]
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert not missing, f"recording rules with no result in VictoriaMetrics: {missing}"
    # Alert state is there too (the scenarios make some alerts pending or firing).
    assert stack.vm.query('ALERTS{alertstate=~"pending|firing"}')


def test_cluster_health_score_spans_both_shards_and_matches_its_definition(stack: ScaleStack) -> None:
    """role:infrapulse_health_score:cluster as vmalert recorded it equals the formula applied to
    the node instances' raw scores, and those instances were written by both Prometheus shards (no
    single shard could compute it). vmalert chains rules through remote write and each shard's
    samples arrive on their own schedule, so the evaluation may have seen each node's score of any
    of the last few scrapes: the recorded value must be the formula over one such combination."""
    (row,) = stack.vm.wait_for('role:infrapulse_health_score:cluster{role="node"}', lambda r: len(r) == 1)
    at, recorded = float(row["value"][0]), float(row["value"][1])
    info = stack.vm.query('infrapulse_node_info{role="node"}', at)
    assert {r["metric"]["prometheus"] for r in info} == {f"shard-{i}" for i in range(SHARDS)}
    assert {r["metric"]["hostname"] for r in info} == {f"gpu-node-0{i + 1}" for i in range(NODES)}
    nodes = sorted(r["metric"]["instance"] for r in info)

    def recent(name: str) -> dict[str, set[float]]:
        """Each node's values of `name` in the ten seconds up to the evaluation."""
        found: dict[str, set[float]] = {}
        for labels, samples in stack.vm.export(name, at - 10, at).items():
            instance = dict(labels)["instance"]
            if instance in nodes:
                found.setdefault(instance, set()).update(v for _, v in samples)
        return found

    scores, coverages = recent("infrapulse_health_score"), recent("infrapulse_health_coverage_ratio")
    assert set(scores) == set(coverages) == set(nodes)
    candidates = []
    for score in itertools.product(*(sorted(scores[n]) for n in nodes)):
        for coverage in itertools.product(*(sorted(coverages[n]) for n in nodes)):
            weighted = sum(s * c for s, c in zip(score, coverage)) / sum(coverage)
            candidates.append(min(weighted, min(score) + 50))
    assert any(math.isclose(recorded, c, abs_tol=1e-6) for c in candidates), (recorded, scores, coverages)


# -- no series lost or duplicated -----------------------------------------------------------------

def test_no_series_is_lost_or_duplicated_across_the_shards(stack: ScaleStack) -> None:
    """Per target, the series in VictoriaMetrics are the daemon's exposition plus the five scrape
    series, each once, labelled with the shard hashmod chose. Series come and go with the
    scenarios (a top-5 status reason can leave and come back between two scrapes), so the
    exposition is looked at every quarter interval over two scrapes and a write: every series
    seen in each look must be stored, and every stored series must have been seen in some look."""
    # The whole fabric streaming first: on a loaded machine a restarted collector (the crash tests)
    # or a slow session can still be coming up, and its switches' series with it.
    stack.vm.wait_for("infrapulse_switch_up == 1", lambda r: len(r) == len(stack.switches),
                      timeout=FABRIC_UP_TIMEOUT)
    addresses = [a for job_addresses in stack.jobs.values() for a in job_addresses]
    fabric = stack.jobs[FABRIC_JOB]
    matched: dict[str, int] = {}
    sizes: dict[str, tuple[int, int, int]] = {}  # (always, stored, ever) at the match
    diffs: dict[str, tuple[set[Labels], set[Labels]]] = {}
    short: list[int] = []  # fabric totals of comparisons that matched a fabric not fully streaming
    deadline = time.monotonic() + FABRIC_UP_TIMEOUT
    while time.monotonic() < deadline:
        pending = [a for a in addresses if a not in matched]
        if not pending:
            break
        looks = {a: [stack.exposition(a)] for a in pending}
        window_end = time.monotonic() + 2 * INTERVAL + 1.5
        while time.monotonic() < window_end:
            time.sleep(INTERVAL / 4)
            for address in pending:
                looks[address].append(stack.exposition(address))
        for address in pending:
            stored = stack.stored(address)
            looks[address].append(stack.exposition(address))
            always, ever = set.intersection(*looks[address]), set.union(*looks[address])
            diffs[address] = (always - stored, stored - ever)
            if not any(diffs[address]):
                matched[address] = len(stored)
                sizes[address] = (len(always), len(stored), len(ever))
        # ... and every switch's ports and queues in (synced covers the on-change paths; the sampled
        # counters follow at their first tick, later on a loaded machine): a fabric that matched
        # short of its full size is compared again. (Not a wait on VictoriaMetrics' count: on a loaded
        # machine it passed 4,000 and the comparison that followed matched the fabric at 2,336.)
        if all(a in matched for a in fabric) and sum(matched[a] for a in fabric) <= FABRIC_SERIES:
            short.append(sum(matched[a] for a in fabric))
            for address in fabric:
                del matched[address]
    unmatched = {a: f"{len(d[0])} series exposed in every look missing (e.g. {sorted(d[0])[:2]}), "
                    f"{len(d[1])} stored that no look saw (e.g. {sorted(d[1])[:2]})"
                 for a, d in diffs.items() if a not in matched}
    assert set(matched) == set(addresses), (unmatched, short)
    # Nothing outside the targets: every infrapulse series belongs to one of the compared targets.
    # (Counted per instance, not per job: a total taken after the comparisons would race the probe
    # node's series, which came and went since its own comparison.)
    instances: dict[str, set[str]] = {}
    by_instance = f'count by (job, instance) ({{job=~"infrapulse-.*", __name__!~"{NOT_SCRAPED}"}})'
    for row in stack.vm.query(by_instance):
        instances.setdefault(row["metric"]["job"], set()).add(row["metric"]["instance"])
    assert instances == {job: set(job_addresses) for job, job_addresses in stack.jobs.items()}
    per_job = {job: sum(matched[a] for a in job_addresses) for job, job_addresses in stack.jobs.items()}
    assert per_job[NODE_JOB] > NODES * 2000 and per_job[FABRIC_JOB] > FABRIC_SERIES, (sizes, short)
    print(f"\nmatched (always, stored, ever) per target: {sizes}; fabric comparisons short of "
          f"{FABRIC_SERIES}: {short}")


# -- crashes --------------------------------------------------------------------------------------

def _gaps(samples: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """(from, to) of every hole between consecutive samples longer than 2.5 scrape intervals."""
    return [(a, b) for (a, _), (b, _) in zip(samples, samples[1:]) if b - a > 2.5 * INTERVAL]


def _firing(sink: NotifierSink, since: float, alertname: str, **labels: str) -> list[dict]:
    return [a for t, a in sink.alerts(since, alertname=alertname, **labels) if not _resolved(t, a)]


def _timestamp(text: str) -> float:
    """An RFC 3339 time as vmalert writes it (nanosecond fractions, which fromisoformat refuses)."""
    m = re.fullmatch(r"(.+T\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)", text)
    assert m, text
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(m.group(1) + zone).timestamp() + float(m.group(2) or 0)


def _resolved(received: float, alert: dict) -> bool:
    """vmalert sends a resolved alert with endsAt = the time it resolved (else in the future)."""
    return _timestamp(alert["endsAt"]) <= received + 0.5


def _wait(what: str, condition, timeout: float, stack: ScaleStack) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}\n{stack.log_tails()}")


def test_a_killed_fabric_collector_leaves_exactly_its_switches_gap_and_its_shard_alerts(
        stack: ScaleStack) -> None:
    victim = next(c for c in stack.fabric if stack.shard_of_target(c.address) == 1)
    scraper = f"shard-{stack.shard_of_target(victim.address)}"
    lost = sorted(s for s in stack.switches if shard_of(s, SHARDS) == victim.index)
    kept = sorted(set(stack.switches) - set(lost))
    assert lost and kept
    killed = time.time()
    victim.kill()
    # The compressed copies of the shipped alerts fire, naming the collector and its scraper.
    not_scraped = _wait("InfrapulseExporterNotScraped", lambda: _firing(
        stack.fast_sink, killed, "InfrapulseExporterNotScraped", instance=victim.address), 60, stack)
    assert {(a["labels"]["job"], a["labels"]["prometheus"]) for a in not_scraped} == {(FABRIC_JOB, scraper)}
    missing = _wait("InfrapulseFabricShardsInconsistent", lambda: _firing(
        stack.fast_sink, killed, "InfrapulseFabricShardsInconsistent", job=FABRIC_JOB), 60, stack)
    assert {a["labels"]["problem"] for a in missing} == {"index_missing"}
    # Its switches are gone from VictoriaMetrics (stale markers); the other shard's are not.
    present = {r["metric"]["switch"] for r in stack.vm.query("infrapulse_switch_up")}
    assert present == set(kept)
    restarted = time.time()
    victim.start()
    _wait("the lost switches back", lambda: len(stack.vm.query(
        f'infrapulse_switch_up{{switch=~"{"|".join(lost)}"}} == 1')) == len(lost), 90, stack)
    _wait("InfrapulseExporterNotScraped resolved", lambda: [
        a for t, a in stack.fast_sink.alerts(restarted, alertname="InfrapulseExporterNotScraped",
                                             instance=victim.address) if _resolved(t, a)], 60, stack)
    # A failing scrape is up == 0, not a vanished target.
    assert not stack.fast_sink.alerts(killed, alertname="InfrapulseTargetVanished")
    recovered = time.time()
    samples = stack.vm.export("infrapulse_switch_up", killed - 30, recovered)
    gaps = {dict(k)["switch"]: _gaps(v) for k, v in samples.items()}
    assert set(gaps) == set(stack.switches)
    for switch in kept:
        assert gaps[switch] == [], f"{switch} (shard kept) has holes {gaps[switch]}"
    for switch in lost:
        assert len(gaps[switch]) == 1, (switch, gaps[switch])
        ((start, end),) = gaps[switch]
        assert killed - 2 * INTERVAL <= start <= killed, (switch, start - killed)
        assert restarted <= end <= recovered, (switch, end - restarted)
    # Its own target never went missing: the scraper recorded up == 0 for the whole outage.
    (up,) = stack.vm.export(f'up{{instance="{victim.address}"}}', killed - 30, recovered).values()
    assert _gaps(up) == []
    assert {v for t, v in up if killed + INTERVAL < t < restarted} == {0.0}


def test_a_killed_prometheus_shard_leaves_exactly_its_targets_gap_and_they_alert(stack: ScaleStack) -> None:
    agent = stack.prometheus[0]
    assert agent.agent
    lost = {a for _, a in stack.targets_of(0)}
    kept = {a for _, a in stack.targets_of(1)}
    killed = time.time()
    agent.kill()
    def all_vanished() -> list[dict] | None:
        found = _firing(stack.fast_sink, killed, "InfrapulseTargetVanished")
        return found if {a["labels"]["instance"] for a in found} >= lost else None

    vanished = _wait("InfrapulseTargetVanished for every target of the agent", all_vanished, 90, stack)
    assert {a["labels"]["instance"] for a in vanished} == lost
    # The fabric collector it scraped is missing from the shard check as well.
    _wait("InfrapulseFabricShardsInconsistent", lambda: _firing(
        stack.fast_sink, killed, "InfrapulseFabricShardsInconsistent", job=FABRIC_JOB,
        problem="index_missing"), 30, stack)
    restarted = time.time()
    agent.start()
    # Fresh samples again (the default 5m lookback would still show the ones from before the crash).
    _wait("every target of the agent back in VictoriaMetrics", lambda: {
        r["metric"]["instance"] for r in stack.vm.query('up{prometheus="shard-0"} == 1', lookback="3s")
    } == lost, 60, stack)
    # (InfrapulseTargetVanished also clears by itself once its `offset` window has passed the crash:
    # 15 s here, 15 min with the shipped rule; its promtool test shows it resolving on recovery.)
    recovered = time.time() + INTERVAL
    time.sleep(INTERVAL + 1)
    ups = stack.vm.export('up{job=~"infrapulse-.*"}', killed - 30, recovered)
    by_instance = {dict(k)["instance"]: (dict(k)["prometheus"], v) for k, v in ups.items()}
    assert set(by_instance) == lost | kept  # one series per target: nothing doubled after the restart
    for address, (prometheus, samples) in by_instance.items():
        assert prometheus == f"shard-{stack.shard_of_target(address)}"
        if address in kept:
            assert _gaps(samples) == [], f"{address} (other shard) has holes"
        else:
            holes = _gaps(samples)
            seen = " ".join(f"{t - killed:.1f}" for t, _ in samples)
            assert len(holes) == 1, f"{address}: samples at {seen} s from the crash"
            ((start, end),) = holes
            assert killed - 2 * INTERVAL <= start <= killed, (address, start - killed)
            assert restarted <= end <= recovered, (address, end - restarted)
    # Nothing doubled either: each target's series once more come from its one shard.
    assert {r["metric"]["instance"]: r["value"][1] for r in stack.vm.query(
        'count by (instance) (up{job=~"infrapulse-.*"})')} == {a: "1" for a in lost | kept}


def test_the_stack_survived(stack: ScaleStack) -> None:
    assert stack.cluster is not None and stack.cluster.poll() is None
    assert all(s.alive() for s in stack.services), stack.log_tails()
    assert http_json(stack.vm.url + "/api/v1/status/tsdb")["status"] == "success"
