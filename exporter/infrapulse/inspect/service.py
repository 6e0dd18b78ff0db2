"""The inspection service inside the daemon: records every health pass, watches the scores,
runs one inspection at a time, stores the reports and publishes the infrapulse_inspection*
families (source "inspect").

It reads each health report from the channel the health service publishes on (the daemon
hands the same `Channel` to both when it composes them); nothing here reaches the daemon or the
health service itself.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from ..deadline import within
from ..health import service as health_service
from ..health.scoring import Report
from ..services import Channel
from ..store import Snapshot, Store, stale_after
from . import compute, kernel_log, network, queue
from .api import routes as api_routes
from .compare import Finding, Windows, windows
from .config import InspectSettings
from .families import (
    DURATION,
    INSPECTIONS,
    LAST_INFO,
    LAST_TIMESTAMP,
    SERIES,
    SERIES_DROPPED,
    SOURCE,
    STORE_ERRORS,
    STORED,
    SUPPRESSED,
)
from .inspection import build, findings, verdict_labels
from .recorder import Recorder
from .reports import ReportStore
from .sample import View, lldp_facing, node_side, rdma_netdevs
from .switchside import SwitchSide
from .trigger import OVERALL, Crossing, Refused, Trigger

log = logging.getLogger("infrapulse.inspect")
TRIGGER_KINDS = ("score", "component", "on_demand")
VERDICT_LAYERS = ("queue", "compute", "network", "none")


class Reloaded(health_service.Reloaded, Protocol):
    """What `reload` reads of the daemon's whole new config: the health service's, and `inspect`."""

    @property
    def inspect(self) -> InspectSettings: ...


@dataclass
class Pending:
    crossings: list[Crossing]
    due: float  # wall-clock time the since window is complete


class InspectionService:
    name = "inspect"

    def __init__(self, store: Store, reports: Channel[Report], config: InspectSettings, state_dir: str,
                 hostname: str, interval: float) -> None:
        self.store = store
        self.health_reports = reports
        self.interval = interval  # the health service's: one step per health pass at most
        self.hostname = hostname
        self.reports = ReportStore(state_dir, config.keep, config.max_bytes)
        self.reports.load()
        self.counts: dict[tuple[str, str], int] = {}
        self.dropped = 0
        self.pending: Pending | None = None
        self.running = False
        self.last_on_demand = float("-inf")
        self._last_pass: float | None = None
        self.configure(config)

    def configure(self, config: InspectSettings) -> None:
        self.config = config
        retention = 2 * config.before + 2 * config.since
        old = getattr(self, "recorder", None)
        if old is None or old.retention != retention or old.max_series != config.max_series:
            self.recorder = Recorder(retention, config.max_series)
        trigger = getattr(self, "trigger", None)
        self.trigger = Trigger(config.score_below, dict(config.component_below), config.rearm_margin,
                               config.min_interval)
        if trigger is not None:  # keep the arming and the rate limit across a reload
            self.trigger.armed, self.trigger.last_start = trigger.armed, trigger.last_start
            self.trigger.suppressed = trigger.suppressed
        self.reports.keep, self.reports.max_bytes = config.keep, config.max_bytes

    def reload(self, full_config: Reloaded) -> None:
        self.interval = full_config.health.interval or full_config.interval
        if full_config.inspect != self.config:
            self.configure(full_config.inspect)

    # -- every pass ----------------------------------------------------------------------------

    def view(self, report: Report) -> View:
        return View(report, self.store, self.hostname, lldp_facing(self.store, self.hostname),
                    rdma_netdevs(self.store), node_side(self.store))

    def observe(self, report: Report) -> list[Crossing]:
        """Record one health pass; the crossings it makes."""
        v = self.view(report)
        samples = [*queue.collect(v), *compute.collect(v), *network.collect(v)]
        comps = {k: s for k, s in report.component_scores.items() if s is not None}
        self.dropped += self.recorder.observe(report.timestamp, samples, report.score, comps)
        return self.trigger.crossings(report.timestamp, report.score, comps)

    async def step(self, now: float | None = None) -> dict[str, Any] | None:
        """One pass of the service: record, trigger, run a due inspection. Returns a new report."""
        now = time.time() if now is None else now
        report = self.health_reports.latest
        if report is not None and report.timestamp != self._last_pass:
            self._last_pass = report.timestamp
            crossings = self.observe(report)
            if crossings:
                busy = self.pending is not None or self.running
                why = self.trigger.admit(report.timestamp, busy)
                if why:
                    log.info("inspection not started", extra={"reason": why,
                                                             "watched": crossings[0].watched})
                else:
                    self.pending = Pending(crossings, report.timestamp + self.config.since)
        made = None
        if self.pending is not None and now >= self.pending.due and not self.running:
            pending, self.pending = self.pending, None
            first = pending.crossings[0]
            component = None if first.watched == OVERALL else first.watched
            win = windows(self.recorder, first.timestamp, self.config.before, self.config.since,
                          component)
            trigger = {"kind": "score" if component is None else "component",
                       "crossings": [c.as_json() for c in pending.crossings]}
            made = await self.run_inspection(win, trigger)
        self.publish()
        return made

    # -- one inspection ------------------------------------------------------------------------

    async def run_inspection(self, win: Windows, trigger: dict[str, Any]) -> dict[str, Any]:
        self.running = True
        started = time.monotonic()
        try:
            return await within(self._inspect(win, trigger, started), self.config.timeout)
        finally:
            self.running = False

    async def _inspect(self, win: Windows, trigger: dict[str, Any], started: float) -> dict[str, Any]:
        notes = []
        if self.recorder.dropped_last_pass:
            notes.append(f"{self.recorder.dropped_last_pass} series over inspect.max_series were not "
                         "recorded in the last pass")
        extra: list[Finding] = []
        if self.config.switch_prometheus.url and not self._facing_in_process():
            extra, more = await SwitchSide(self.config.switch_prometheus, self.hostname).findings(win)
            notes += more
        layers = findings(self.recorder, win, extra)
        latest = self.health_reports.latest
        endpoints = queue.endpoints(self.view(latest)) if latest is not None else []
        report = build(self.hostname, trigger, win, layers, endpoints, notes, started)
        # The kernel log's last event of the verdict's device, as evidence (inspect/kernel_log.py).
        report["verdict"]["kernel_log"] = kernel_log.last_event(
            self.store, verdict_labels(report["verdict"], layers))
        workloads = latest.workloads if latest is not None else None
        if workloads is not None:  # the blast radius of the verdict's target (health/blast.py)
            report["verdict"]["affected"] = workloads.affected(
                verdict_labels(report["verdict"], layers)).as_json()
        self.reports.save(report)
        key = (trigger["kind"], report["verdict"]["layer"])
        self.counts[key] = self.counts.get(key, 0) + 1
        log.info("inspection", extra={"id": report["id"], "verdict": report["verdict"]["text"]})
        return report

    def _facing_in_process(self) -> bool:
        return any(m.target.find(" (facing ") > 0 for m in self.recorder.meta.values())

    async def on_demand(self, now: float | None = None) -> dict[str, Any]:
        now = time.time() if now is None else now
        if self.running or self.pending is not None:
            self.trigger.suppressed["busy"] = self.trigger.suppressed.get("busy", 0) + 1
            raise Refused(409, "busy: an inspection is pending or running")
        wait = self.config.on_demand_min_interval - (now - self.last_on_demand)
        if wait > 0:
            self.trigger.suppressed["rate_limited"] = self.trigger.suppressed.get("rate_limited", 0) + 1
            raise Refused(429, f"at most one on-demand inspection every "
                               f"{self.config.on_demand_min_interval:g}s", wait)
        self.last_on_demand = now
        crossing = now - self.config.since
        win = windows(self.recorder, crossing, self.config.before, self.config.since)
        report = await self.run_inspection(win, {"kind": "on_demand", "crossings": []})
        self.publish()
        return report

    # -- metrics -------------------------------------------------------------------------------

    def publish(self) -> None:
        snap = Snapshot(time.time())
        # Every (trigger, layer) from the start, at 0 until it happens: increase() sees the first one.
        for kind in TRIGGER_KINDS:
            for layer in VERDICT_LAYERS:
                snap.add(INSPECTIONS, (kind, layer), float(self.counts.get((kind, layer), 0)))
        for reason in ("busy", "rate_limited"):
            snap.add(SUPPRESSED, (reason,), float(self.trigger.suppressed.get(reason, 0)))
        latest = self.reports.latest()
        if latest is not None:
            verdict = latest["verdict"]
            snap.add(LAST_TIMESTAMP, (), float(latest["timestamp"]))
            snap.add(LAST_INFO, (str(latest["id"]), str(verdict["layer"]), str(verdict["cause"]),
                                 str(verdict["target"])), 1.0)
            snap.add(DURATION, (), float(latest.get("duration_seconds", 0.0)))
        snap.add(SERIES, (), float(self.recorder.series_count()))
        snap.add(SERIES_DROPPED, (), float(self.dropped))
        snap.add(STORE_ERRORS, (), float(self.reports.errors))
        snap.add(STORED, (), float(len(self.reports.reports)))
        self.store.publish(SOURCE, self.hostname, snap, stale_after=stale_after(self.interval))

    # -- task ----------------------------------------------------------------------------------

    async def run(self) -> None:
        """One step per health report (or per interval without one: a pending inspection
        still comes due)."""
        seen = self.health_reports.version
        while True:
            await self.health_reports.wait_newer(seen, self.interval)
            seen = self.health_reports.version
            try:
                await self.step()
            except Exception:  # a bug in one pass must not stop inspections for good
                log.exception("inspection pass failed")

    def routes(self, app: web.Application) -> None:
        api_routes(self)(app)

    async def close(self) -> None:
        return None
