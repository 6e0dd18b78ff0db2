"""The health scorer inside the daemon: a background task, the families, the API and the page.

`attach(daemon)` is called by the daemon at start (daemon.EXTENSIONS). Every daemon interval
the service reads the store, scores, and publishes the infrapulse_health_* families back into
the store as source "health", so /metrics serves them like any other family. It adds
`GET /api/v1/health` (JSON) and the status page at `/`.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from aiohttp import web

from ..http import (
    CSP_KEY,
    LINKS_KEY,
    SCENARIOS_KEY,
    STATE_KEY,
    content_security_policy,
    sources_status,
    with_own_scripts,
)
from ..inventory import inventory
from ..services import Channel
from ..store import Snapshot, Store, stale_after
from . import page
from .blast import WorkloadIndex
from .config import HealthSettings
from .coverage import coverage_notes
from .families import (
    COMPONENT_SCORE,
    COVERAGE,
    DETRACTOR,
    HEALTH_SCORE,
    HEALTH_STATUS,
    SIGNAL_SCORE,
    STATUS_REASON,
    STATUS_THRESHOLD,
)
from .latency import QuantileTracker
from .readings import HEALTH_SOURCE, Readings
from .scoring import (
    STATUSES,
    Report,
    apply_status,
    attach_blast_radius,
    evaluate,
    report_json,
    resolve_settings,
    round_score,
)
from .signals import SIGNALS, SPARSE_COUNTERS, Context, Measurement, counters_by_window
from .signals.link import classify as link_classes
from .smoothing import Smoother

log = logging.getLogger("infrapulse.health")

METRIC_DETRACTORS = 3  # bounded cardinality of infrapulse_health_detractor_info
METRIC_STATUS_REASONS = 5  # and of infrapulse_health_status_reason_info
HISTORY_STEP_SECONDS = 10.0  # one sparkline point per 10 s at most


class Reloaded(Protocol):
    """What `reload` reads of the daemon's whole new config (`infrapulse.config.Config`, a layer
    above this package, which must not be imported here)."""

    interval: float  # the daemon's default interval

    @property
    def health(self) -> HealthSettings: ...


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold the cyclic GC off for one pass. A pass makes tens of thousands of short-lived objects
    (rates, measurements, target scores) and no reference cycles: reference counting frees them.
    Left on, the GC triggers every 700 of them and, every hundred triggers, walks the daemon's
    whole heap (every gNMI series' labels and bindings): over half of a fabric pass's CPU."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class HealthService:
    """The health scorer as a daemon service: a pass every `interval`, each report published on
    `reports` (the inspections read it there), /api/v1/health and the status page."""

    name = "health"

    def __init__(self, store: Store, config: HealthSettings, hostname: str, interval: float,
                 reports: Channel[Report] | None = None) -> None:
        self.store = store
        self.reports: Channel[Report] = reports if reports is not None else Channel()
        self.hostname = hostname
        self.interval = interval
        self.history: deque[tuple[float, float | None]] = deque()
        self.report: Report | None = None
        self._json: dict[str, Any] | None = None
        self.workloads = WorkloadIndex(hostname)
        # Windowed TTFT/ITL per serving endpoint: fed from the store every pass, kept across reloads.
        self.latency = QuantileTracker(config.window)
        self.configure(config)

    # -- configuration -------------------------------------------------------------------------

    def configure(self, config: HealthSettings) -> None:
        """(Re)build everything that depends on the `health:` section. History is kept."""
        self.config = config
        self.settings = resolve_settings(config)
        self.readings = Readings({"window": config.window, "event_window": config.event_window,
                                  "link_window": config.link.window,
                                  "link_baseline": config.link.baseline_window}, SPARSE_COUNTERS)
        self.smoother = Smoother(config.smoothing.recovery, config.smoothing.hysteresis)
        self.counters = counters_by_window()
        self.latency.set_window(config.window)
        span = config.history
        self.history = deque(self.history, maxlen=max(int(span / HISTORY_STEP_SECONDS), 2))

    def reload(self, full_config: Reloaded) -> None:
        self.interval = full_config.health.interval or full_config.interval
        if full_config.health != self.config:
            self.configure(full_config.health)

    # -- one pass ------------------------------------------------------------------------------

    def measure(self) -> dict[str, list[Measurement] | None]:
        self.readings.update(self.store, self.counters)
        self.latency.observe_store(self.store)
        cfg = self.config
        ctx = Context(self.readings, hostname=self.hostname,
                      latency=self.latency.endpoint_latency(cfg.window),
                      slo={"ttft": cfg.slo.ttft_p95_seconds, "itl": cfg.slo.itl_p95_seconds},
                      pre_fec_ber_floor=cfg.link.pre_fec_ber_floor)
        present = self.readings.sources_present()
        measured: dict[str, list[Measurement] | None] = {}
        for name, signal in SIGNALS.items():
            if not signal.applicable(present):
                measured[name] = None
                continue
            values = signal.measure(ctx)
            ctx.results[name] = values
            measured[name] = values
        self._latency = ctx.latency
        self.workloads = WorkloadIndex.from_readings(self.readings, self.hostname)
        return measured

    def tick(self, now: float | None = None) -> Report:
        now = time.time() if now is None else now
        with gc_paused():
            self.store.expire()
            measured = self.measure()
            self.readings.end_pass()  # the measurements are taken: per-pass caches go
            report = evaluate(measured, self.config, self.settings, timestamp=now,
                              max_detractors=max(self.config.detractors, METRIC_DETRACTORS))
            report.latency = self._latency
            attach_blast_radius(report, self.workloads)
            bad = {name: s.bad for name, s in self.settings.items()}
            report.links = [{"port": c.port, "state": c.state, "evidence": c.evidence}
                            for c in link_classes(measured, bad).values()]
            report.coverage_notes = coverage_notes(self.store)
            self._smooth(report, now)
            self.report = report
            self._json = None
            self._publish(report)
            self.reports.publish(report)
        if not self.history or now - self.history[-1][0] >= HISTORY_STEP_SECONDS:
            self.history.append((now, report.score))
        return report

    def _smooth(self, report: Report, now: float) -> None:
        """Smoothing, then the one rounding and the status words of what is published."""
        raw_status = report.status
        previous = self.report.status if self.report else None
        smooth = self.smoother.apply
        report.score = round_score(smooth("score", report.score, now, force=raw_status != previous))
        for name, comp in report.components.items():
            report.component_scores[name] = round_score(smooth(("component", name), comp.score, now))
        apply_status(report, self.config)

    def _publish(self, report: Report) -> None:
        snap = Snapshot(report.timestamp)
        if report.score is not None:
            snap.add(HEALTH_SCORE, (), report.score)
        for status in STATUSES:  # a state set: every status present, 1 for the current one
            snap.add(HEALTH_STATUS, (status,), 1.0 if status == report.status else 0.0)
        levels = self.config.status_thresholds
        for status, level in (("degraded", levels.degraded), ("critical", levels.critical)):
            snap.add(STATUS_THRESHOLD, (status,), float(level))
        snap.add(COVERAGE, (), report.coverage)
        for name, comp in report.components.items():
            score = report.component_scores.get(name)
            if score is not None:
                snap.add(COMPONENT_SCORE, (name,), score)
            for result in comp.signals:
                if result.score is not None:
                    snap.add(SIGNAL_SCORE, (name, result.signal.name), result.score)
        for d in report.detractors[:METRIC_DETRACTORS]:
            snap.add(DETRACTOR,
                     (str(d.rank), d.component, d.result.signal.name, d.target.measurement.target), 1.0)
        for rank, r in enumerate(report.status_reasons[:METRIC_STATUS_REASONS], start=1):
            snap.add(STATUS_REASON, (str(rank), r.status, r.rule, r.component, r.signal, r.target), 1.0)
        self.store.publish(HEALTH_SOURCE, self.hostname, snap, stale_after=stale_after(self.interval))

    def as_json(self) -> dict[str, Any]:
        report = self.report if self.report is not None else self.tick()
        if self._json is None:
            body = report_json(report)
            body["detractors"] = body["detractors"][: self.config.detractors]
            self._json = body
        return {**self._json, "host": self.hostname, "sources": sources_status(self.store)}

    # -- task ----------------------------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        next_run = loop.time()
        while True:
            try:
                self.tick()
            except Exception:  # a bug in one signal must not stop scoring for good
                log.exception("health scoring failed")
            next_run += self.interval
            now = loop.time()
            if next_run < now:
                next_run = now + self.interval
            await asyncio.sleep(next_run - now)

    async def close(self) -> None:
        return None

    # -- HTTP ----------------------------------------------------------------------------------

    def routes(self, app: web.Application) -> None:
        async def health(request: web.Request) -> web.Response:
            return web.json_response(self.as_json(), dumps=lambda o: json.dumps(o, indent=2))

        async def status_page(request: web.Request) -> web.Response:
            body = self.as_json()
            state = request.app.get(STATE_KEY)
            role_name = state.role if state is not None else ""
            stored = request.app.get(LINKS_KEY)
            links: list[tuple[str, str]] = list(stored) if stored else []
            board = request.app.get(SCENARIOS_KEY)  # the demo's scenario toggles
            text = page.render(body, body["sources"], list(self.history), self.config.history,
                               self.hostname, role_name, links, bands=self.config.status_thresholds,
                               inventory=inventory(self.store), scenarios=board,  # type: ignore[arg-type]
                               runbook_base=self.config.runbook_base_url)
            headers = {}
            if board is not None:  # the toggles' script: same-origin scripts on this page only
                headers["Content-Security-Policy"] = with_own_scripts(
                    request.app.get(CSP_KEY) or content_security_policy())
            return web.Response(text=text, content_type="text/html", headers=headers)

        async def static(request: web.Request) -> web.Response:
            text, content_type = page.static_file(request.path)
            return web.Response(text=text, content_type=content_type)

        app.router.add_get("/api/v1/health", health)
        app.router.add_get("/", status_page)
        for path in page.STATIC:
            app.router.add_get(path, static)
