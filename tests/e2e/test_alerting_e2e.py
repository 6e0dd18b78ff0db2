"""End to end: simulated fabric -> infrapulse daemon -> Prometheus (the repo's rules) ->
Alertmanager (the repo's routing) -> webhook receivers.

A real Prometheus (Debian) scrapes the demo every two seconds and evaluates alerts/*.rules.yaml
with time compressed 60x (range windows, offsets and `for` divided by 60, windows at least 20 s
— generated from the real files at test time); a real Alertmanager runs alerts/alertmanager.yml
with second-scale group timing and its webhooks pointed at a receiver in this test.

* The healthy demo (`infrapulse demo`, as `make demo` runs it) fires no alert, pending or firing,
  for a compressed hour, and its status stays healthy.
* Every scenario, one at a time, clearly trips what it is for: its alert reaches the right team's
  receiver with the right labels, the health score drops, the scenario's signal is a detractor
  naming its target, and the status is what the health semantics promise (critical for hardware
  and fabric faults, degraded — never critical, never capped — for a latency SLO breach). The
  demo runs with health windows as short as the compressed rules (6 s, events 12 s), so the
  score is back to healthy before the next scenario starts. At the end every alert that fired
  resolves.
* A property of the whole product, over **every** scenario the demo lists (the ones above and any
  other, so a new scenario or rule is covered without touching this file): while a scenario is
  active, every alert firing at warning or above implies a non-healthy status on every surface —
  /api/v1/health, `infrapulse score`'s exit code, the status page and the
  `infrapulse_health_status` series Prometheus scraped.
* The same walk checks docs/inspections.md's scenario table (inspection_table.py): the calm demo
  inspects nothing, and each of the table's scenarios gets an inspection with the table's
  verdict. The walk is the suite's longest test: it runs in two halves (WALKS), each on its own
  stack and in its own file (test_alerting_walk_0.py, _1.py), which xdist runs side by side; each
  stack walks its scenarios once for both checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from alerting_stack import (  # noqa: E402
    AlertmanagerServer,
    WebhookReceiver,
    compressed_rules,
    test_alertmanager_config,
)
from conftest import free_port  # noqa: E402
from inspection_table import INSPECT, Inspections, Row, open_in_chromium, table_rows  # noqa: E402
from prom import PrometheusServer  # noqa: E402

FACTOR = 60  # compressed time: one hour of rules runs in a minute
FIRE_TIMEOUT = 120.0
RECOVER_TIMEOUT = 60.0
RESOLVE_TIMEOUT = 120.0
# The scenario demo's health section: windows as short as the compressed rules', and every
# detractor listed so a scenario's own is found whatever else moves.
SHORT_HEALTH = {"window": "6s", "event_window": "12s", "link": {"window": "12s", "baseline_window": "60s"},
                "detractors": 20}
LAUNCHER = Path(__file__).resolve().parent / "demo_launcher.py"
# Every demo here collects at the default interval, as `make demo` does (a serving scrape may take
# 1.6 s, 80% of it, before it counts as down; at 1 s a loaded machine made a scrape late, and the
# walk's two stacks cost twice the CPU). The inspections' arrivals hold a few requests a second:
# their "the load grew" needs growth past count noise (inspect/compare.py excess_sigmas).
DEMO_INTERVAL = "2s"


@dataclass(frozen=True)
class Scenario:
    name: str
    alertname: str
    receivers: tuple[str, ...]  # where a firing notification may land (warning or critical level)
    labels: tuple[tuple[str, str], ...]  # labels the alert must carry
    signals: tuple[str, ...]  # the first names the scenario; the top detractor is one of them ...
    targets: tuple[str, ...]  # ... on a target that starts with one of these
    max_score: float  # the score must fall at least this low (and 2 points below where it was)
    status: str = ""  # the status it must reach ("" = the score drop and the reasons are promised)

    def matches(self, alert: dict) -> bool:
        return (alert["labels"].get("alertname") == self.alertname and alert["receiver"] in self.receivers
                and all(alert["labels"].get(k) == v for k, v in self.labels))


SCENARIOS = [
    # Fabric and hardware faults: a critical signal fires, the score is capped at 40, critical.
    Scenario("pfc-storm", "InfrapulseNicPfcPauseStorm", ("noc-page",),
             (("team", "noc"), ("severity", "critical"), ("interface", "ens1f0np0"), ("priority", "3")),
             ("pfc_pause_ratio",), ("ens1f0np0 priority 3", "leaf01 "), 40.0, "critical"),
    Scenario("link-flap", "InfrapulseSwitchInterfaceFlapping", ("noc-page",),
             (("team", "noc"), ("severity", "critical"), ("switch", "leaf01")),
             ("link_flaps",), ("ens1f0np0", "leaf01 "), 40.0, "critical"),
    # Retrains every few seconds with CRC bursts, carrier up: the half-dead alert pages (the PHY
    # error and degraded-BER alerts stand back); the BER signals move with it.
    Scenario("half-dead-link", "InfrapulseNicLinkHalfDead", ("noc-page",),
             (("team", "noc"), ("severity", "critical"), ("interface", "ens1f0np0")),
             ("link_half_dead", "link_post_fec_ber", "link_pre_fec_ber_rise", "phy_error_rate"),
             ("ens1f0np0",), 40.0, "critical"),
    Scenario("xid", "InfrapulseGpuCriticalXid", ("ml-page",),
             (("team", "ml"), ("severity", "critical"), ("xid", "79")),
             ("xid_critical", "gpu_lost"), ("GPU ",), 40.0, "critical"),
    Scenario("engine-restart", "InfrapulseLlmEndpointDown", ("ml-page",),
             (("team", "ml"), ("severity", "critical")),
             ("endpoint_down",), ("endpoint ",), 40.0, "critical"),
    # Congestion and warning-level faults: the score drops, the signal leads the reasons.
    # (one port, one GPU: the weighted score moves a few points, the reasons lead with it).
    Scenario("ecn-spike", "InfrapulseSwitchQueueEcnMarkingHigh", ("noc", "noc-page"),
             (("team", "noc"), ("switch", "leaf01"), ("queue", "3")),
             ("ecn_marked_ratio", "nic_ecn_marked_ratio"), ("leaf01 ", "ens1f0np0", "mlx5_0"), 95.0),
    Scenario("rdma-retrans", "InfrapulseRdmaRetransmissionsHigh", ("noc",),
             (("team", "noc"), ("device", "mlx5_0")),
             # its whole weight costs 1.57 points (3 of the rdma component's weights, 0.15 of the
             # score; the kernel-log NIC signal joined that component)
             ("retransmission_rate",), ("mlx5_0 port 1",), 99.0),
    # its whole weight costs 1.21 points (2 of the gpu component's weights, 0.25 of the score;
    # the kernel-log GPU and PCIe signals joined that component)
    Scenario("gpu-thermal", "InfrapulseGpuThrottling", ("ml",),
             (("team", "ml"),), ("throttle_active",), ("GPU ",), 99.0),
    # A firmware upgrade resets the NIC's congestion control: the change pages the NOC (firmware
    # changed with it); ECN NP off on the RDMA priority leads the reasons. Its revert is a second change
    # that stays in the event window after the scenario: a latency scenario with a large drop follows.
    Scenario("fw-upgrade-cc-reset", "InfrapulseNicRoceConfigChanged", ("noc-page",),
             (("team", "noc"), ("severity", "critical"), ("interface", "ens1f0np0"),
              ("firmware_changed", "true")),
             ("roce_ecn_np_off", "roce_config_changed", "roce_config_unexpected", "ecn_marked_without_cnp"),
             ("ens1f0np0", "mlx5_0"), 99.0),
    # Latency SLO breaches: past the bad level the serving component is capped, the status is
    # degraded — but the overall cap of 40 is not used: the ML team is paged, not the NOC.
    Scenario("ttft-surge", "InfrapulseLlmTtftSloBurnRate", ("ml-page",),
             (("team", "ml"), ("severity", "critical")),
             ("ttft_p95",), ("endpoint ",), 80.0, "degraded"),
    Scenario("queue-buildup", "InfrapulseLlmQueueBuildingUp", ("ml", "ml-page"),
             (("team", "ml"),), ("queue_ratio", "ttft_p95"), ("endpoint ",), 80.0, "degraded"),
    # Active probes: the firmware changes once the probes have a baseline (built during the healthy
    # hour); the change-triggered run finds 8 B all_reduce latency +40 %, and both teams hear it.
    Scenario("fw-upgrade-regression", "InfrapulseProbeBaselineRegression", ("noc", "ml"),
             (("team", "all"), ("test", "all_reduce"), ("metric", "latency"), ("size", "8")),
             ("probe_latency_regression",), ("all_reduce ",), 99.0),
]


BY_NAME = {s.name: s for s in SCENARIOS}
# The walk in halves, each on its own stack (walk_scenarios; xdist runs them side by side). Each
# keeps the order its scenarios need: fw-upgrade-regression after the probes' baseline rounds, and a latency
# scenario with a large drop after fw-upgrade-cc-reset (its revert is a second change that stays
# in the event window). The demo's other scenarios are dealt to the halves in turn.
# The first half also walks two of the three unlisted scenarios (a minute each), so the second takes
# the two short listed ones that need no calm inspection window first (engine-restart, rdma-retrans).
WALKS = (
    ("pfc-storm", "half-dead-link", "fw-upgrade-cc-reset", "ttft-surge"),
    ("link-flap", "xid", "ecn-spike", "gpu-thermal", "queue-buildup", "engine-restart", "rdma-retrans",
     "fw-upgrade-regression"),
)


def test_the_walks_share_out_every_scenario_once():
    names = [name for walk in WALKS for name in walk]
    assert sorted(names) == sorted(BY_NAME) and len(names) == len(set(names))


class Demo:
    """The demo as a subprocess (its own process group, output to a file): `infrapulse demo`, or
    with a test's `health:` and `inspect:` sections (tests/e2e/demo_launcher.py)."""

    def __init__(self, workdir: Path, health: dict | None = None, inspect: dict | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "demo.log"
        self._log = open(self.log_path, "w")
        common = ["--listen", f"127.0.0.1:{self.port}", "--interval", DEMO_INTERVAL,
                  "--workdir", str(workdir / "demo")]
        sections = [*(["--health", json.dumps(health)] if health else []),
                    *(["--inspect", json.dumps(inspect)] if inspect else [])]
        argv = ([sys.executable, str(LAUNCHER), *common, *sections] if sections
                else [sys.executable, "-m", "infrapulse", "demo", *common])
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"demo exited: {self.log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1):
                    return
            except OSError:
                time.sleep(0.3)
        raise TimeoutError("demo not ready")

    def scenario(self, name: str, active: bool) -> None:
        body = json.dumps({"name": name, "active": active}).encode()
        req = urllib.request.Request(self.url + "/api/v1/scenarios", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200

    def known_scenarios(self) -> set[str]:
        with urllib.request.urlopen(self.url + "/api/v1/scenarios", timeout=10) as resp:
            return set(json.load(resp)["known"])

    def health(self) -> dict:
        with urllib.request.urlopen(self.url + "/api/v1/health", timeout=10) as resp:
            return json.load(resp)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()


@contextlib.contextmanager
def alerting_stack(workdir: Path, health: dict | None = None,
                   inspect: dict | None = None) -> Iterator[tuple[Demo, PrometheusServer, WebhookReceiver]]:
    hook = WebhookReceiver()
    started: list = []
    try:
        am = AlertmanagerServer(workdir, test_alertmanager_config(workdir, hook.url, token="e2e-token"))
        started.append(am)
        demo = Demo(workdir, health, inspect)
        started.append(demo)
        am.wait_ready()
        demo.wait_ready()
        rules_dir = workdir / "rules"
        rules_dir.mkdir()
        rules = compressed_rules(rules_dir, factor=FACTOR, window_floor=20, for_floor=1)
        prom = PrometheusServer(
            workdir, {"infrapulse": [f"127.0.0.1:{demo.port}"]}, scrape_interval="2s",
            rule_files=[str(p) for p in rules], evaluation_interval="1s", alertmanager=f"127.0.0.1:{am.port}",
            extra_args=["--rules.alert.resend-delay=1s"])
        started.append(prom)
        prom.wait_ready()
        # Every simulator is scraped (the gNMI switches and the engines take a few seconds).
        prom.wait_for('up{job="infrapulse"} == 1', timeout=30)
        prom.wait_for('infrapulse_switch_up{switch="leaf01"} == 1', timeout=60)
        prom.wait_for("infrapulse_llm_time_to_first_token_seconds_count", timeout=60)
        yield demo, prom, hook
    finally:
        for proc in reversed(started):
            proc.stop()
        hook.close()


def _wait(predicate, timeout: float, interval: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def _alert_series(prom: PrometheusServer, expr: str = "ALERTS") -> list[tuple[str, str, str]]:
    return sorted((a["metric"]["alertname"], a["metric"].get("alertstate", ""),
                   a["metric"].get("severity", "")) for a in prom.query(expr))


def test_the_healthy_demo_fires_no_alert_in_a_compressed_hour(tmp_path):
    with alerting_stack(tmp_path) as (demo, prom, hook):
        # Prometheus evaluates rules before its first scrape: absent(up) makes
        # InfrapulseExporterNotScraped pending (its `for` is 5 s here). Start the hour once that
        # start-up state is gone and a full compressed rate window (20 s) of normal traffic has
        # passed: 11 scrapes 2 s apart span it.
        prom.wait_for('count_over_time(up{job="infrapulse"}[30s]) >= 11', timeout=60)
        assert _wait(lambda: not prom.query("ALERTS"), 30), f"alerts at start: {_alert_series(prom)}"
        start, notified = time.time(), len(hook.notifications)
        statuses: dict[str, int] = {}
        lowest = 100.0
        while time.time() - start < FACTOR + 10:  # an hour of rules, and the last evaluations
            body = demo.health()
            statuses[body["status"]] = statuses.get(body["status"], 0) + 1
            lowest = min(lowest, body["score"] if body["score"] is not None else 0.0)
            time.sleep(2)
        elapsed = int(time.time() - start)
        seen = _alert_series(prom, f"last_over_time(ALERTS[{elapsed}s])")
        pause = prom.query("max(rate(infrapulse_nic_pfc_pause_duration_seconds_total[60s]))")
        frames = prom.query("max(rate(infrapulse_nic_pfc_pause_frames_total[60s])) * 3600")
        mesh_p99 = prom.query(f"max(max_over_time(infrapulse_probe_mesh_rtt_p99_seconds[{elapsed}s]))")
        untimed = prom.query("sum(infrapulse_probe_mesh_untimed_total)")
        print(f"\nhealthy demo, {elapsed}s = {elapsed / FACTOR:.2f} compressed hours: alerts {seen}, "
              f"statuses {statuses}, lowest score {lowest}, worst NIC pause ratio {pause[0]['value'][1]}, "
              f"most NIC pause frames per hour {frames[0]['value'][1]}, worst mesh p99 "
              f"{mesh_p99[0]['value'][1]} s, untimed mesh probes {untimed[0]['value'][1]}")
        assert seen == [], f"the healthy demo raised alerts (pending or firing): {seen}"
        firing = [a["labels"]["alertname"] for _, _, payload in hook.notifications[notified:]
                  for a in payload["alerts"] if a["status"] == "firing"]
        assert firing == []
        assert set(statuses) == {"healthy"} and lowest >= 95.0, (statuses, lowest)
        assert float(pause[0]["value"][1]) < 0.001  # far below the 1%-of-an-hour PausesWithoutDrops


@dataclass
class Evidence:
    """What one scenario showed while it was active."""

    scenario: Scenario
    baseline: float  # the score when it started
    seconds_to_alert: float | None = None
    lowest_score: float = 100.0
    statuses: set[str] = field(default_factory=set)
    detractor: dict | None = None  # the scenario's own signal on its target, at any rank
    top: dict | None = None  # a rank-1 detractor of the scenario's
    impact: float = 0.0  # the most points a detractor of the scenario's signals on its targets cost
    worst_body: dict | None = None  # the health report at the lowest score
    serving_p95: dict[str, float] = field(default_factory=dict)  # highest TTFT p95 per endpoint

    def observe(self, body: dict) -> None:
        s = self.scenario
        self.statuses.add(body["status"])
        score = body["score"] if body["score"] is not None else 0.0
        if score <= self.lowest_score:
            self.lowest_score, self.worst_body = score, body
        for d in body["detractors"]:
            if not d["target"].startswith(s.targets):
                continue
            if self.detractor is None and s.signals[0] in d["signals"]:
                self.detractor = d
            if self.top is None and d["rank"] == 1 and set(d["signals"]) & set(s.signals):
                self.top = d
            if set(d["signals"]) & set(s.signals):
                self.impact = max(self.impact, d["impact"])
        for endpoint, lat in body["serving"].items():
            p95 = lat["ttft_seconds"]["p95"]
            if p95 is not None:
                self.serving_p95[endpoint] = max(p95, self.serving_p95.get(endpoint, 0.0))

    def score_dropped(self) -> bool:
        """The score fell to the scenario's bound, and by the scenario's own doing: its detractor
        cost at least a point. (Not "2 points below the score at the start": a residue of the
        previous scenario, 99.7 say, may fade while this one runs, and rdma-retrans costs 1.57.)"""
        return self.lowest_score <= self.scenario.max_score and self.impact >= 1.0

    def health_tripped(self) -> bool:
        s = self.scenario
        return (self.detractor is not None and self.top is not None and self.score_dropped()
                and (not s.status or s.status in self.statuses))

    def summary(self) -> str:
        d = self.top or self.detractor
        return (f"{self.scenario.name}: {self.scenario.alertname} after {self.seconds_to_alert}s; score "
                f"{self.baseline} -> {self.lowest_score} (its own detractor cost {self.impact}), statuses "
                f"{sorted(self.statuses)}; top detractor "
                f"{d['sentence'] if d else None}")


PAGING = 'ALERTS{alertstate="firing", severity=~"warning|critical"}'
EXIT_STATUS = {0: "healthy", 1: "degraded", 2: "critical", 3: "unknown"}


def _paging(prom: PrometheusServer) -> set[str]:
    return {a["metric"]["alertname"] for a in prom.query(PAGING)}


def _surfaces(demo: Demo, prom: PrometheusServer) -> dict[str, str]:
    """The status word on every surface, read now."""
    cli = subprocess.run([sys.executable, "-m", "infrapulse", "score", "--url", demo.url],
                         capture_output=True, text=True, timeout=30)
    with urllib.request.urlopen(demo.url + "/", timeout=10) as resp:
        page = re.search(r'id="score" data-score="[^"]*" data-status="([a-z]+)"', resp.read().decode())
    scraped = [s["metric"]["status"] for s in prom.query("infrapulse_health_status == 1")]
    exit_word = EXIT_STATUS.get(cli.returncode, f"exit {cli.returncode}")
    return {"api": demo.health()["status"], "score": exit_word,
            "page": page.group(1) if page else "?", "prometheus": scraped[0] if scraped else "absent"}


class Agreement:
    """While one scenario is active: every sample in which an alert (warning or above) has been
    firing for longer than Prometheus' lag must read non-healthy in the API; once, every surface."""

    # Prometheus sees the daemon a scrape (2 s) plus an evaluation (1 s) late: an alert on a
    # condition that has just cleared can still read firing for that long while the API, which
    # reads the store, is already past it. Only an alert firing longer than this must agree.
    LAG_S = 5.0

    def __init__(self, name: str, prom: PrometheusServer) -> None:
        self.name, self.prom = name, prom
        self.residue = _paging(prom)  # still firing from before this scenario: not its doing
        self.since: dict[str, float] = {}  # alert -> when it was first seen firing, continuously
        self.paged: set[str] = set()
        self.violations: list[tuple[list[str], str, list[str]]] = []
        self.surfaces: dict[str, str] | None = None

    def sample(self, demo: Demo) -> None:
        firing = _paging(self.prom) - self.residue
        now = time.monotonic()
        self.since = {a: self.since.get(a, now) for a in firing}
        sustained = {a for a, t in self.since.items() if now - t >= self.LAG_S}
        self.paged |= sustained  # what fired past the lag: the surfaces must agree on it once
        if not sustained:
            return
        body = demo.health()
        if body["status"] == "healthy":
            self.violations.append((sorted(sustained), body["status"],
                                    [d["sentence"] for d in body["detractors"][:3]]))
        elif self.surfaces is None:
            # the other surfaces lag the API by at most a scrape (2 s) and a CLI start
            def agree() -> bool:
                self.surfaces = _surfaces(demo, self.prom)
                return "healthy" not in self.surfaces.values()
            _wait(agree, 15, interval=1.0)

    def check(self) -> None:
        assert not self.violations, f"{self.name}: alerts fired while the status read healthy: " \
                                    f"{self.violations}"
        if self.paged:
            assert self.surfaces is not None and "healthy" not in self.surfaces.values(), \
                (self.name, sorted(self.paged), self.surfaces)


def _assert_the_page_names_the_detractors_workloads(alerts: list[dict], detractor: dict) -> None:
    """The notification's `affected` annotation (PromQL over the join series) names exactly the
    workloads the health API's detractor names (health/blast.py over the same series)."""
    affected = detractor["affected"]
    named = {f"{w['kind']} {w['name']}" for w in affected["workloads"]}
    assert affected["state"] == "known" and named, affected
    for alert in alerts:
        assert set(alert["annotations"]["affected"].split(", ")) == named, (alert["annotations"], affected)


def walk_scenarios(tmp_path: Path, walk: int) -> None:
    """One half of the scenario walk (WALKS[walk]) on its own stack: its tests are
    test_alerting_walk_0.py and test_alerting_walk_1.py, a file each, so that xdist (loadfile)
    runs them side by side."""
    rows = {r.scenario: r for r in table_rows()}
    assert list(rows) == ["pfc-storm", "ecn-spike", "link-flap", "half-dead-link", "fw-upgrade-cc-reset",
                          "xid", "queue-buildup", "ttft-surge"]
    scenarios = [BY_NAME[name] for name in WALKS[walk]]
    verdicts: dict[str, dict] = {}
    with alerting_stack(tmp_path, SHORT_HEALTH, INSPECT) as (demo, prom, hook):
        walk_start = time.monotonic()

        def phase(text: str) -> None:  # where the walk's minutes go, in the test's output
            print(f"\n[{time.monotonic() - walk_start:4.0f}s] {text}")

        inspections = Inspections(demo.url)
        listed = demo.known_scenarios()
        missing = set(BY_NAME) - listed
        assert not missing, f"the demo does not implement {missing}"
        assert _wait(lambda: demo.health()["status"] == "healthy", 30), demo.health()["detractors"]
        inspections.wait_calm()
        assert inspections.ids() == set(), "a healthy demo was inspected"
        phase("healthy and calm")

        def fired(s: Scenario) -> list[dict]:
            return [a for a in hook.alerts() if a["status"] == "firing" and s.matches(a)]

        agreements: list[Agreement] = []
        for s in scenarios:
            assert not fired(s), f"{s.alertname} fired before {s.name}"
            row = rows.get(s.name)
            if row is not None:  # the inspection's before window: calm, not the last scenario's tail
                inspections.wait_calm()
            seen = inspections.ids()
            ev = Evidence(s, baseline=demo.health()["score"])
            pages_before = _firing_keys(hook.alerts("noc-page"))
            agreement = Agreement(s.name, prom)
            agreements.append(agreement)
            start = time.monotonic()
            demo.scenario(s.name, True)
            reports: list[dict] = []  # the scenario's new inspection, once it is there

            def tripped(ev: Evidence = ev, start: float = start, agreement: Agreement = agreement,
                        row: Row | None = row, seen: set[str] = seen, reports: list[dict] = reports) -> bool:
                agreement.sample(demo)
                ev.observe(demo.health())
                if ev.seconds_to_alert is None and fired(ev.scenario):
                    ev.seconds_to_alert = round(time.monotonic() - start)
                if row is not None and not reports:
                    report = inspections.new_report(seen)
                    if report is not None:
                        reports.append(report)
                verdict_in = row is None or bool(reports)
                return ev.seconds_to_alert is not None and ev.health_tripped() and verdict_in

            _wait(tripped, FIRE_TIMEOUT, interval=1.0)
            demo.scenario(s.name, False)
            phase(ev.summary())
            if row is not None:
                assert reports, f"{s.name}: no inspection within {FIRE_TIMEOUT:.0f}s"
                verdicts[s.name] = {"id": reports[0]["id"], **reports[0]["verdict"]}
                print(f"{s.name}: verdict {reports[0]['verdict']['text']}")
            assert fired(s), (f"no {s.alertname} notification for {s.name}; received: "
                              f"{sorted({(a['receiver'], a['labels']['alertname']) for a in hook.alerts()})}")
            detractors = ev.worst_body and ev.worst_body["detractors"]
            assert ev.detractor is not None and ev.top is not None, (s.name, detractors)
            if s.name == "pfc-storm":
                _assert_the_page_names_the_detractors_workloads(fired(s), ev.detractor)
            assert ev.score_dropped(), (s.name, ev.baseline, ev.lowest_score, ev.impact)
            if s.status:
                assert s.status in ev.statuses, (s.name, ev.statuses)
            if s.name == "ttft-surge":
                new_pages = _firing_keys(hook.alerts("noc-page")) - pages_before
                _assert_an_slo_breach_is_degraded_not_capped(ev, new_pages)
            # the next scenario starts from a fully healthy score
            assert _wait(lambda: _recovered(demo.health()), RECOVER_TIMEOUT, interval=1.0), \
                (s.name, demo.health()["detractors"])

        # Every other listed scenario (no expectations written for it here): while it is active,
        # whatever it fires must not coexist with a healthy status.
        for name in sorted(listed - set(BY_NAME))[walk::len(WALKS)]:
            agreement = Agreement(name, prom)
            agreements.append(agreement)
            demo.scenario(name, True)
            start = time.monotonic()
            while time.monotonic() - start < FIRE_TIMEOUT / 2:
                agreement.sample(demo)
                if agreement.surfaces is not None:
                    break
                time.sleep(1.0)
            demo.scenario(name, False)
            phase(f"{name}: paged {sorted(agreement.paged)}, surfaces {agreement.surfaces}")
            assert _wait(lambda: _recovered(demo.health()), RECOVER_TIMEOUT, interval=1.0), \
                (name, demo.health()["detractors"])
        for agreement in agreements:
            agreement.check()
        print("\nstatus on every surface while paging: " + "; ".join(
            f"{a.name} {sorted(a.paged)} -> {a.surfaces}" for a in agreements))

        # Every notification carried the bearer token read from the credentials file.
        assert {auth for _, auth, _ in hook.notifications} == {"Bearer e2e-token"}
        # Team routing: nothing of the NOC's reached the ML receivers and vice versa.
        for alert in hook.alerts():
            team = alert["labels"].get("team")
            if team == "noc":
                assert alert["receiver"] in ("noc", "noc-page"), alert
            elif team == "ml":
                assert alert["receiver"] in ("ml", "ml-page"), alert
        for s in scenarios:
            alert = fired(s)[0]
            assert alert["annotations"]["runbook_url"].endswith(f"/docs/runbooks/{s.alertname}.md")
            assert alert["annotations"]["summary"] and alert["annotations"]["description"]

        def resolved(s: Scenario) -> bool:
            # every alert instance that fired has been sent again as resolved
            keys = {json.dumps(a["labels"], sort_keys=True) for a in fired(s)}
            done = {json.dumps(a["labels"], sort_keys=True) for a in hook.alerts()
                    if a["status"] == "resolved" and s.matches(a)}
            return keys <= done

        _wait(lambda: all(resolved(s) for s in scenarios), RESOLVE_TIMEOUT)
        phase("every alert that fired resolved")
        unresolved = [s.name for s in scenarios if not resolved(s)]
        assert not unresolved, f"still firing after the scenario ended: {unresolved}"

        wrong = {name: v for name, v in verdicts.items() if rows[name].wrong(v)}
        assert wrong == {}, json.dumps(verdicts, indent=1)
        last = verdicts[[s.name for s in scenarios if s.name in rows][-1]]
        verdict_text, violations, border = asyncio.run(
            open_in_chromium(f"{demo.url}/inspections/{last['id']}", tmp_path / "chromium"))
    assert f"verdict: {last['layer']}" in verdict_text and last["target"] in verdict_text
    assert violations == [] and border == "solid"  # the stylesheet applied, no inline style needed


def _recovered(body: dict) -> bool:
    return body["status"] == "healthy" and body["score"] is not None and body["score"] >= 99.0


def _firing_keys(alerts: list[dict]) -> set[tuple[str, str]]:
    """Firing alerts by labels and start: a re-sent notification of an older alert is not new."""
    return {(json.dumps(a["labels"], sort_keys=True), a["startsAt"]) for a in alerts
            if a["status"] == "firing"}


def _assert_an_slo_breach_is_degraded_not_capped(ev: Evidence, new_noc_pages: set) -> None:
    body = ev.worst_body
    assert body is not None
    # well past the 1.5 s SLO: at least its bad level (twice the SLO) on the engines with TTFT
    assert max(ev.serving_p95.values()) >= 3.0, ev.serving_p95
    # degraded, never critical: the serving component is capped by ttft_p95, the overall score is not
    assert "critical" not in ev.statuses, ev.statuses
    assert body["cap"] is None and body["firing"] == [], body["firing"]
    serving = next(c for c in body["components"] if c["name"] == "serving")
    assert serving["score"] == 0.0 and serving["capped_by"] == "ttft_p95"
    assert any(b["signal"] == "ttft_p95" and b["past_bad"] for b in body["slo_breaches"])
    # a load-driven breach pages the ML team, not the NOC (HealthScoreLow stays at its warning)
    assert not new_noc_pages, new_noc_pages

