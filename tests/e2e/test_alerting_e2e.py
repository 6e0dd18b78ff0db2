"""End to end: simulated fabric -> infrapulse daemon -> Prometheus (the repo's rules) ->
Alertmanager (the repo's routing) -> webhook receivers.

`infrapulse demo` runs the simulators and the daemon; a real Prometheus (Debian) scrapes it every two
seconds and evaluates alerts/*.rules.yaml with time compressed 60x (range windows, offsets and `for`
divided by 60, windows at least 20 s — generated from the real files at test time); a real
Alertmanager runs alerts/alertmanager.yml with second-scale group timing and its webhooks pointed
at a receiver in this test. Six scenarios are switched on together over the demo's HTTP API; each
must reach the right team's receiver with the right labels, then resolve after it is switched off.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from alerting_stack import (  # noqa: E402
    AlertmanagerServer,
    WebhookReceiver,
    compressed_rules,
    test_alertmanager_config,
)
from conftest import free_port  # noqa: E402
from prom import PrometheusServer  # noqa: E402

FIRE_TIMEOUT = 120.0
RESOLVE_TIMEOUT = 90.0


@dataclass(frozen=True)
class Expectation:
    scenario: str
    alertname: str
    receivers: tuple[str, ...]  # where a firing notification may land (warning or critical level)
    labels: tuple[tuple[str, str], ...]  # labels the alert must carry

    def matches(self, alert: dict) -> bool:
        return (alert["labels"].get("alertname") == self.alertname and alert["receiver"] in self.receivers
                and all(alert["labels"].get(k) == v for k, v in self.labels))


EXPECTATIONS = [
    # The switch side of the storm is simulated on leaf01, whose OpenConfig profile has no PFC model,
    # so the NIC side is what this scenario can show end to end.
    Expectation("pfc-storm", "InfrapulseNicPfcPauseStorm", ("noc-page",),
                (("team", "noc"), ("severity", "critical"), ("priority", "3"))),
    Expectation("ecn-spike", "InfrapulseSwitchQueueEcnMarkingHigh", ("noc", "noc-page"),
                (("team", "noc"), ("switch", "leaf01"), ("queue", "3"))),
    Expectation("link-flap", "InfrapulseSwitchInterfaceFlapping", ("noc-page",),
                (("team", "noc"), ("severity", "critical"), ("switch", "leaf01"))),
    Expectation("ttft-surge", "InfrapulseLlmTtftSloBurnRate", ("ml", "ml-page"),
                (("team", "ml"),)),
    Expectation("xid", "InfrapulseGpuCriticalXid", ("ml-page",),
                (("team", "ml"), ("severity", "critical"), ("xid", "79"))),
    # The firmware changes once the probes have a baseline; the change-triggered run regresses.
    Expectation("fw-upgrade-regression", "InfrapulseProbeBaselineRegression", ("noc", "ml"),
                (("team", "all"), ("test", "all_reduce"), ("metric", "latency"), ("size", "8"))),
]


class Demo:
    """`infrapulse demo` as a subprocess (its own process group, output to a file)."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "demo.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "infrapulse", "demo", "--listen", f"127.0.0.1:{self.port}",
             "--interval", "1s", "--workdir", str(workdir / "demo")],
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
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

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("alerting-e2e")
    hook = WebhookReceiver()
    started: list = []
    try:
        am = AlertmanagerServer(workdir, test_alertmanager_config(workdir, hook.url, token="e2e-token"))
        started.append(am)
        demo = Demo(workdir)
        started.append(demo)
        am.wait_ready()
        demo.wait_ready()
        rules_dir = workdir / "rules"
        rules_dir.mkdir()
        rules = compressed_rules(rules_dir, factor=60, window_floor=20, for_floor=1)
        prom = PrometheusServer(
            workdir, {"infrapulse": [f"127.0.0.1:{demo.port}"]}, scrape_interval="2s",
            rule_files=[str(p) for p in rules], evaluation_interval="1s", alertmanager=f"127.0.0.1:{am.port}",
            extra_args=["--rules.alert.resend-delay=1s"])
        started.append(prom)
        prom.wait_ready()
        yield demo, prom, am, hook
    finally:
        for proc in reversed(started):
            proc.stop()
        hook.close()


def _firing_in_prometheus(prom: PrometheusServer, name: str) -> list[dict]:
    return prom.query(f'ALERTS{{alertname="{name}",alertstate="firing"}}')


def _wait(predicate, timeout: float, interval: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def test_scenarios_page_the_right_team_and_resolve(stack):
    demo, prom, am, hook = stack
    missing = {e.scenario for e in EXPECTATIONS} - demo.known_scenarios()
    assert not missing, f"the demo does not implement {missing}"

    # Baseline: the fabric is scraped and healthy, and none of the expected alerts fire.
    prom.wait_for('up{job="infrapulse"} == 1', timeout=30)
    prom.wait_for('infrapulse_switch_up{switch="leaf01"} == 1', timeout=60)
    prom.wait_for("infrapulse_llm_time_to_first_token_seconds_count", timeout=60)
    time.sleep(20)  # a full compressed rate window of normal traffic
    for e in EXPECTATIONS:
        assert not _firing_in_prometheus(prom, e.alertname), f"{e.alertname} fires before {e.scenario}"

    for e in EXPECTATIONS:
        demo.scenario(e.scenario, True)

    def fired(e: Expectation) -> list[dict]:
        return [a for a in hook.alerts() if a["status"] == "firing" and e.matches(a)]

    _wait(lambda: all(fired(e) for e in EXPECTATIONS), FIRE_TIMEOUT)
    not_fired = [e.scenario for e in EXPECTATIONS if not fired(e)]
    assert not not_fired, (f"no notification for {not_fired}; received: "
                           f"{sorted({(a['receiver'], a['labels']['alertname']) for a in hook.alerts()})}")

    # Every notification carried the bearer token read from the credentials file.
    assert {auth for _, auth, _ in hook.notifications} == {"Bearer e2e-token"}
    # Team routing: nothing of the NOC's reached the ML receivers and vice versa.
    for alert in hook.alerts():
        team = alert["labels"].get("team")
        if team == "noc":
            assert alert["receiver"] in ("noc", "noc-page"), alert
        elif team == "ml":
            assert alert["receiver"] in ("ml", "ml-page"), alert
    for e in EXPECTATIONS:
        alert = fired(e)[0]
        assert alert["annotations"]["runbook_url"].endswith(f"/docs/runbooks/{e.alertname}.md")
        assert alert["annotations"]["summary"] and alert["annotations"]["description"]

    for e in EXPECTATIONS:
        demo.scenario(e.scenario, False)

    def resolved(e: Expectation) -> bool:
        # every alert instance that fired has been sent again as resolved
        keys = {json.dumps(a["labels"], sort_keys=True) for a in fired(e)}
        done = {json.dumps(a["labels"], sort_keys=True) for a in hook.alerts()
                if a["status"] == "resolved" and e.matches(a)}
        return keys <= done

    _wait(lambda: all(resolved(e) for e in EXPECTATIONS), RESOLVE_TIMEOUT)
    unresolved = [e.scenario for e in EXPECTATIONS if not resolved(e)]
    assert not unresolved, f"still firing after the scenario ended: {unresolved}"
    for e in EXPECTATIONS:
        assert not _firing_in_prometheus(prom, e.alertname)
