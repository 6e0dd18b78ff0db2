"""Source `serving`: scrape LLM serving engines and normalise them into infrapulse_llm_*.

Every configured endpoint (vLLM, SGLang, TensorRT-LLM under Triton or trtllm-serve, TGI) is
its own target, polled by its own task on its own interval, so a slow or broken engine never
delays another. Per scrape: fetch `/metrics` (`infrapulse.scrape`), detect the engine from
metric prefixes unless configured, map into the common schema (`normalize`), report what the
mapping yields per family (`coverage`: a promised family missing or an engine family nobody
reads shows in infrapulse_source_mapping_series and /api/v1/sources), add
`infrapulse_llm_endpoint_up` and the engine's process start time (the health score's latency
windows read both), and publish. A failed scrape publishes only `endpoint_up 0` (the
engine's series vanish rather than go stale) and records the reason on
`infrapulse_source_up{source="serving",target=<endpoint>}`.

`passthrough: true` also re-exposes the engine's own families unchanged plus an `endpoint`
label (an engine label of that name becomes `exported_endpoint`, as Prometheus does). An endpoint
holds at most `max_series` series (normalised ones first, see `budget`); the rest are dropped,
counted in infrapulse_source_series_dropped_total, and the endpoint reported `partial`.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from ... import catalog
from ...schema import Bool, Duration, Int, ListOf, SchemaError, Section, Settings, Str, setting, settings
from ...scrape import ScrapeError, Scraper, ScrapeTarget
from ...store import Histogram, Snapshot, stale_after
from ...textparse import MetricFamily, typed_from_names
from ..base import Source, SourceContext, SourceSettings
from ..budget import SeriesBudget
from . import normalize as norm
from .coverage import mapping_coverage

ENGINE_CHOICES = ("auto", "vllm", "sglang", "trtllm", "triton", "tgi")
# Configured engine -> exposition formats it may speak (trtllm covers both TRT-LLM servers).
ACCEPTED_FORMATS = {"vllm": ("vllm",), "sglang": ("sglang",), "trtllm": ("trtllm", "triton"),
                    "triton": ("triton",), "tgi": ("tgi",)}
PREFIXES = {"vllm": ("vllm:", "vllm_", "ray_vllm:"), "sglang": ("sglang:", "sglang_"),
            "triton": ("nv_trt_llm_", "nv_inference_"), "trtllm": ("trtllm_",), "tgi": ("tgi_",)}


def _check_endpoint(ep: ServingEndpointSettings, path: str) -> None:
    if not ep.url.lower().startswith(("http://", "https://")):
        raise SchemaError(f"{path}.url", f"expected an http:// or https:// URL, got {ep.url!r}")
    if ep.interval is not None and ep.timeout is not None and ep.timeout > ep.interval:
        raise SchemaError(f"{path}.timeout", "must not exceed the endpoint's interval")
    if ep.bearer_token_file and ep.bearer_token_env:
        raise SchemaError(f"{path}.bearer_token_env", "set bearer_token_file or bearer_token_env, not both")


def _check(section: ServingSettings, path: str) -> None:
    seen: set[str] = set()
    for i, ep in enumerate(section.endpoints):
        if ep.name in seen:
            raise SchemaError(f"{path}.endpoints[{i}].name", f"duplicate endpoint name {ep.name!r}")
        seen.add(ep.name)


@settings("One serving engine's metrics endpoint.", check=_check_endpoint)
@dataclass(kw_only=True, slots=True)
class ServingEndpointSettings(Settings):
    name: str = setting(Str("Endpoint name: the `endpoint` label and the source target.", required=True,
                            pattern=r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}"))
    url: str = setting(Str("URL of the engine's Prometheus endpoint, e.g. http://127.0.0.1:8000/metrics "
                           "(vLLM/SGLang/trtllm-serve API port, Triton :8002, TGI :80).", required=True))
    engine: str = setting(Str(
        "Engine: auto detects it from metric prefixes (vllm:, ray_vllm:, sglang:, "
        "nv_trt_llm_/nv_inference_, trtllm_, tgi_; trtllm-serve 1.x's unprefixed names only "
        "when labelled model_name and engine_type); triton = Triton (with the TensorRT-LLM "
        "backend), trtllm = trtllm-serve (or Triton+TRT-LLM; also reads unprefixed "
        "trtllm-serve names).", default="auto", choices=ENGINE_CHOICES))
    model: str = setting(Str("Value of the `model` label when the engine exposes none (TGI) or an empty one.",
                             default=""))
    interval: float | None = setting(Duration("Scrape interval of this endpoint (default: the global "
                                              "interval).", min=0.05))
    timeout: float | None = setting(Duration("Timeout of one scrape (default: 80% of the interval, at most "
                                             "10s).", min=0.01))
    bearer_token_file: str = setting(Str("File holding a bearer token sent as `Authorization: Bearer` "
                                         "(re-read when it changes).", default=""))
    bearer_token_env: str = setting(Str("Environment variable holding a bearer token.", default=""))
    headers_env: str = setting(Str("Environment variable holding extra request headers: a JSON object or "
                                   "`Name: value` lines (for API keys; values are never logged).",
                                   default=""))
    ca_file: str = setting(Str("CA bundle that verifies an https:// endpoint (default: system CAs).",
                               default=""))
    tls_insecure_skip_verify: bool = setting(Bool("Skip TLS certificate verification (labs only).",
                                                  default=False))
    passthrough: bool = setting(Bool("Also re-expose the engine's raw families with an `endpoint` label. "
                                     "Off by default: it doubles ingestion when Prometheus scrapes the "
                                     "engine too.", default=False))
    keep_labels: list[str] = setting(ListOf(
        "Engine labels to keep instead of aggregating them away: " + ", ".join(norm.KEEPABLE)
        + " (dp_rank is vLLM's `engine` label, role is SGLang's engine_type, model_version is Triton's "
        "version).", item=Str(choices=norm.KEEPABLE), default=[]))
    max_response_bytes: int = setting(Int("Largest /metrics body accepted; a bigger one fails with "
                                          "too_large.", default=16 << 20, min=1024))
    retries: int = setting(Int("Quick retries within one scrape after a reset or a 502/503/504.", default=1,
                               min=0, max=5))


ENDPOINT = ServingEndpointSettings.SCHEMA


@dataclass(frozen=True)
class Endpoint:
    name: str
    engine: str
    model: str
    interval: float
    passthrough: bool
    keep: tuple[str, ...]
    target: ScrapeTarget

    @classmethod
    def from_config(cls, ep: ServingEndpointSettings, default_interval: float) -> Endpoint:
        interval = ep.interval or default_interval
        timeout = ep.timeout or min(0.8 * interval, 10.0)
        target = ScrapeTarget(url=ep.url, timeout=timeout, max_bytes=ep.max_response_bytes,
                              bearer_token_file=ep.bearer_token_file,
                              bearer_token_env=ep.bearer_token_env, headers_env=ep.headers_env,
                              ca_file=ep.ca_file, tls_insecure_skip_verify=ep.tls_insecure_skip_verify,
                              retries=ep.retries)
        return cls(ep.name, ep.engine, ep.model, interval, ep.passthrough, tuple(ep.keep_labels), target)


def choose_format(families: dict[str, MetricFamily], configured: str) -> str:
    """The exposition format to map, or ScrapeError unknown_engine / engine_mismatch."""
    if configured == "auto":
        fmt = norm.detect(families)
        if fmt is None:
            raise ScrapeError("unknown_engine",
                              "no vllm:, ray_vllm:, sglang:, nv_trt_llm_/nv_inference_, trtllm_ "
                                                "or tgi_ metrics in the response (set engine: for unprefixed "
                                                "trtllm-serve names)")
        return fmt
    for fmt in ACCEPTED_FORMATS[configured]:
        if any(name.startswith(PREFIXES[fmt]) for name in families):
            return fmt
    if configured == "trtllm" and any(name in families for name in norm.TRTLLM_UNPREFIXED):
        return "trtllm"  # trtllm-serve 1.x: unprefixed names, accepted by name when configured
    raise ScrapeError("engine_mismatch",
                      f"configured engine {configured} but none of its metrics are present")


def passthrough_series(families: dict[str, MetricFamily], endpoint: str, snapshot: Snapshot) -> list[str]:
    """Add the engine's raw families to the snapshot; returns names skipped for type conflicts."""
    skipped = []

    def key_of(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
        items = dict(labels)
        if "endpoint" in items:
            items["exported_endpoint"] = items.pop("endpoint")
        items["endpoint"] = endpoint
        return tuple(sorted(items.items()))

    def add(name: str, typ: str, help_: str, values: dict[tuple[tuple[str, str], ...], Any]) -> None:
        if not values:
            return
        family = catalog.declare_passthrough(name, typ, help_)
        if family is None:
            skipped.append(name)
            return
        # Passthrough series are keyed by sorted (label, value) pairs, not label values (catalog.Family).
        snapshot.series.setdefault(name, {}).update(values)  # type: ignore[arg-type]

    for fam in families.values():
        if fam.type == "histogram":
            hists: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
            for s in fam.samples:
                if s.name == fam.name + "_bucket":
                    labels = {k: v for k, v in s.labels.items() if k != "le"}
                    acc = hists.setdefault(key_of(labels), {"b": [], "sum": 0.0, "count": 0.0})
                    try:
                        acc["b"].append((float(s.labels.get("le", "nan")), s.value))
                    except ValueError:
                        continue
                elif s.name in (fam.name + "_sum", fam.name + "_count"):
                    acc = hists.setdefault(key_of(s.labels), {"b": [], "sum": 0.0, "count": 0.0})
                    acc["sum" if s.name.endswith("_sum") else "count"] = s.value
            values = {k: Histogram(tuple(sorted(b for b in v["b"] if not math.isnan(b[0]))), v["sum"],
                                   v["count"])
                      for k, v in hists.items() if v["b"]}
            add(fam.name, catalog.HISTOGRAM, fam.help, values)
        elif fam.type == "counter" and any(s.name == fam.name + "_total" for s in fam.samples):
            add(fam.name + "_total", catalog.COUNTER, fam.help,
                {key_of(s.labels): s.value for s in fam.samples if s.name == fam.name + "_total"})
        elif fam.type == "gauge":
            add(fam.name, catalog.GAUGE, fam.help, {key_of(s.labels): s.value for s in fam.samples})
        else:  # untyped, summaries, counters without _total, info, stateset: sample by sample
            by_name: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
            for s in fam.samples:
                if not s.name.endswith("_created"):
                    by_name.setdefault(s.name, {})[key_of(s.labels)] = s.value
            for name, by_labels in by_name.items():
                add(name, catalog.UNTYPED, fam.help, by_labels)
    return skipped


# Why `history` stays accepted but warns: it used to bound the TTFT/ITL readings, and a
# health.window longer than it was a silent misconfiguration. The health service now keeps
# exactly the readings its window needs, so the key has no effect at all and can go.
HISTORY_DEPRECATED = ("deprecated and ignored: the health service keeps the TTFT/ITL readings its "
                      "health.window needs; remove the key")


@settings("LLM serving engines (vLLM, SGLang, TensorRT-LLM via Triton or trtllm-serve, TGI): scraped, "
          "normalised into infrapulse_llm_*, and summarised for the health score. See docs/serving.md.",
          check=_check)
@dataclass(kw_only=True, slots=True)
class ServingSettings(SourceSettings):
    enabled: bool = setting(Bool("Scrape the configured endpoints (the source only runs when there are "
                                 "some).", default=True))
    endpoints: list[ServingEndpointSettings] = setting(ListOf("Serving endpoints to scrape.", item=ENDPOINT,
                                                              default=[]))
    history: float = setting(Duration("Ignored, accepted so existing configs still load: the health service "
                                      "keeps the TTFT/ITL readings its own health.window needs.",
                                      default="10m", min=10, deprecated=HISTORY_DEPRECATED))
    max_series: int = setting(Int("Most series one endpoint may hold, normalised and passthrough together (a "
                                  "histogram counts once); new series past it are dropped and counted in "
                                  "infrapulse_source_series_dropped_total.", default=10_000, min=1))


CONFIG = ServingSettings.SCHEMA


class ServingSource(Source[ServingSettings]):
    name: ClassVar[str] = "serving"
    CONFIG: ClassVar[Section] = CONFIG

    @classmethod
    def absent_reason(cls, config: ServingSettings) -> str:
        return "no endpoints configured"

    @classmethod
    def wanted(cls, config: ServingSettings) -> bool:
        return bool(config.enabled) and bool(config.endpoints)

    def __init__(self, config: ServingSettings, ctx: SourceContext) -> None:
        super().__init__(config, ctx)
        self.endpoints = [Endpoint.from_config(ep, ctx.interval) for ep in config.endpoints]
        self.scraper = Scraper()
        self._engine_of: dict[str, str] = {}  # last detected engine label per endpoint
        self._was_up: dict[str, bool] = {}
        self.budgets = {ep.name: SeriesBudget(config.max_series) for ep in self.endpoints}

    def stale_after(self, ep: Endpoint) -> float:
        return stale_after(ep.interval)

    async def run(self) -> None:
        tasks = [asyncio.create_task(self._poll_forever(ep), name=f"serving:{ep.name}")
                 for ep in self.endpoints]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self) -> None:
        await self.scraper.close()

    async def _poll_forever(self, ep: Endpoint) -> None:
        loop = asyncio.get_running_loop()
        next_run = loop.time()
        while True:
            try:
                await self.poll_endpoint(ep)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug: report it on this endpoint only and keep polling
                self.log.exception("serving endpoint poll failed", extra={"endpoint": ep.name})
                self._failed(ep, "error", f"{type(exc).__name__}: {exc}", 0.0)
            next_run += ep.interval
            now = loop.time()
            if next_run < now:
                next_run = now + ep.interval
            await asyncio.sleep(next_run - now)

    async def poll_endpoint(self, ep: Endpoint) -> None:
        """Scrape, normalise and publish one endpoint once."""
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        try:
            result = await self.scraper.scrape(ep.target, deadline=loop.time() + 0.9 * ep.interval)
            typed = typed_from_names(result.families)  # an exposition without # TYPE lines
            fmt = choose_format(typed, ep.engine)
        except ScrapeError as exc:
            self._failed(ep, exc.reason, exc.message, time.perf_counter() - started)
            return
        families = norm.canonical_names(typed, fmt)
        engine = norm.engine_label(fmt, families)
        snapshot = Snapshot()
        norm.normalise(families, fmt, ep.name, engine, ep.keep, ep.model, snapshot)
        partial = []
        if ep.passthrough:
            skipped = passthrough_series(result.families, ep.name, snapshot)
            partial += [f"passthrough {name}: name taken by another type" for name in skipped[:5]]
        budget = self.budgets[ep.name]
        dropped = budget.apply(snapshot)
        if dropped:
            self.store.count_dropped_series(self.name, ep.name, dropped)
            partial.append(SeriesBudget.message(dropped, budget.limit))
        self._report_coverage(ep, families, fmt, engine, snapshot)
        snapshot.add(norm.ENDPOINT_UP, (ep.name, engine), 1.0)
        started_at = _process_start(families)
        if started_at is not None:
            snapshot.add(PROCESS_START, (ep.name, engine), started_at)
        self._engine_of[ep.name] = engine
        self.store.publish(self.name, ep.name, snapshot, self.stale_after(ep))
        self.store.record_success(self.name, ep.name, time.perf_counter() - started, partial)
        if not self._was_up.get(ep.name, True):
            self.log.info("serving endpoint recovered", extra={"endpoint": ep.name, "engine": engine})
        self._was_up[ep.name] = True

    def _report_coverage(self, ep: Endpoint, families: dict[str, MetricFamily], fmt: str, engine: str,
                         snapshot: Snapshot) -> None:
        """Promised families (0 = missing) and engine families no rule reads, per endpoint."""
        series, unread = mapping_coverage(families, fmt, engine, snapshot)
        self.store.set_coverage(self.name, ep.name, series)
        for item in unread:
            self.store.count_unmapped(self.name, ep.name, item.family, item.example, item.samples)

    def _failed(self, ep: Endpoint, reason: str, message: str, duration: float) -> None:
        engine = self._engine_of.get(ep.name) or (ep.engine if ep.engine != "auto" else "unknown")
        snapshot = Snapshot()
        snapshot.add(norm.ENDPOINT_UP, (ep.name, engine), 0.0)
        self.store.publish(self.name, ep.name, snapshot, self.stale_after(ep))
        self.store.record_failure(self.name, ep.name, reason, message, duration)
        if self._was_up.get(ep.name, True):
            self.log.warning("serving endpoint down", extra={"endpoint": ep.name, "reason": reason,
                                                             "detail": message})
        self._was_up[ep.name] = False


# A change means the engine restarted: health's latency windows then count from the restart.
PROCESS_START = catalog.declare(
    "infrapulse_llm_process_start_time_seconds", catalog.GAUGE,
    "Start time of the engine's process (its process_start_time_seconds) in Unix seconds; a change "
    "means the engine restarted. Absent when the engine does not expose it.",
    ("endpoint", "engine"), unit="seconds", source="serving")


def _process_start(families: dict[str, MetricFamily]) -> float | None:
    fam = families.get("process_start_time_seconds")
    if fam and fam.samples:
        return fam.samples[0].value
    return None


SOURCE = ServingSource
