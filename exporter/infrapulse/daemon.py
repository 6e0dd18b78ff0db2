"""The asyncio supervisor: sources as tasks, the services it composes, the HTTP server, signals
and config reload.

Services (`services.Service`: the health scorer, the inspections, whatever a caller adds with
`add_service`, e.g. the demo's scenario toggles) are built here, from the config, before the
daemon starts; each runs as one task, adds its routes and hears reloads. Health hands each
report to the inspections over a `services.Channel` the daemon gives both; neither knows the
daemon.

SIGTERM/SIGINT stop everything within ~2 s and exit 0. SIGHUP re-reads the config file: a
valid new config restarts only the sources whose settings changed; an invalid one is logged
and the old config keeps running, with infrapulse_config_last_reload_successful set to 0.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import config as config_mod
from . import memory
from .config import Config
from .health.scoring import Report
from .health.service import HealthService
from .http import json_error, make_app
from .httpguard import ClientErrorLog, ConnectionGuard, GuardLimits, HttpStats
from .inspect.service import InspectionService
from .metrics import DaemonState, make_registry
from .services import Channel, Service
from .sources import registry as source_registry
from .sources.base import Source, SourceContext
from .store import Store

if TYPE_CHECKING:  # webconfig pulls in bcrypt and cryptography; the daemon only holds one
    from .webconfig import WebSecurity

log = logging.getLogger("infrapulse.daemon")

# What a running source was started from: its config section (repr), the interval and the state
# directory. A reload restarts the sources whose key changed.
SourceKey = tuple[str, float, str]

STOP_GRACE_SECONDS = 1.5
# Connections waiting for accept(): room for a burst of scrapers beside a flood being shed.
LISTEN_BACKLOG = 1024


class Daemon:
    def __init__(self, config: Config, config_path: str | None = None,
                 listen_override: str | None = None, hostname: str | None = None,
                 web_security: WebSecurity | None = None,
                 source_options: dict[str, Any] | None = None) -> None:
        self.config = config
        # Handed to every source as SourceContext.options: how the CLI or the demo injects
        # things a source must not import itself (the NVML fake).
        self.source_options = dict(source_options or {})
        self.config_path = config_path
        self.listen_override = listen_override
        self.store = Store()
        hostname = (hostname or config.hostname or os.environ.get("INFRAPULSE_HOSTNAME")
                    or socket.gethostname())
        self.state = DaemonState(hostname, self._role(config))
        self.registry = make_registry(self.store, self.state)
        self.sources: dict[str, tuple[Source[Any], asyncio.Task[None], SourceKey]] = {}
        self.services: list[Service] = compose_services(config, self.store, self.state.hostname)
        self._tasks: list[asyncio.Task[None]] = []  # the services' and the daemon's own background tasks
        self.web_security = web_security  # TLS and basic auth, or None
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None
        self._guard: ConnectionGuard | None = None
        # Refused connections and requests, counted across listener restarts and exported.
        self.http_stats = HttpStats()
        self.registry.register(self.http_stats)
        self._stop = asyncio.Event()
        self._reload_lock = asyncio.Lock()
        self.bound_port: int | None = None

    @property
    def health(self) -> HealthService | None:
        return next((s for s in self.services if isinstance(s, HealthService)), None)

    def add_service(self, service: Service) -> None:
        """Compose one more service (before `start`)."""
        if self._runner is not None:
            raise RuntimeError("add_service after start: its routes would never be served")
        self.services.append(service)

    # -- life cycle --------------------------------------------------------------------------

    @property
    def listen(self) -> str:
        return self.listen_override or self.config.listen

    async def start(self) -> None:
        memory.tune()  # before any source starts gRPC's threads
        self._tasks.append(asyncio.create_task(memory.trim_periodically(), name="malloc-trim"))
        for service in self.services:
            self._tasks.append(asyncio.create_task(service.run(), name=service.name))
        self._start_sources(self.config)
        if self.web_security is not None:
            self._tasks.append(asyncio.create_task(self.web_security.watch(), name="web-config-watch"))
        await self._start_http()
        log.info("infrapulse started", extra={"listen": self.listen, "role": self.state.role,
                                               "sources": sorted(self.sources)})

    async def _start_http(self) -> None:
        security = self.web_security
        http_cfg = self.config.http
        # The guard admits connections (caps, deadlines, TLS) and, as the outermost middleware,
        # learns when a request's headers are in; see httpguard.
        guard = ConnectionGuard(GuardLimits.from_config(http_cfg), self.http_stats,
                                security.ssl_context if security is not None else None)
        middlewares = [guard.middleware] + ([security.middleware] if security is not None else [])
        app = make_app(self.store, self.state, self.registry,
                       [*(s.routes for s in self.services), self._source_routes],
                       middlewares,
                       render_cache=http_cfg.render_cache, csp_report_uri=http_cfg.csp_report_uri)
        # keepalive_timeout closes idle keep-alive connections; lingering_time bounds reading
        # the unread body of a request that was answered.
        runner = self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5,
                                              keepalive_timeout=http_cfg.idle_timeout,
                                              lingering_time=http_cfg.header_timeout,
                                              logger=ClientErrorLog(self.http_stats))
        await runner.setup()
        assert runner.server is not None  # set by setup()
        guard.bind(runner.server)
        host, _, port = self.listen.rpartition(":")
        bind_host = host.strip("[]") or None
        try:
            self._server = await asyncio.get_running_loop().create_server(
                guard, bind_host, int(port), reuse_address=True, backlog=LISTEN_BACKLOG)
        except OSError as exc:
            await runner.cleanup()
            raise RuntimeError(f"cannot listen on {self.listen}: {exc.strerror or exc}") from None
        self._guard = guard
        self.bound_port = self._server.sockets[0].getsockname()[1]

    def _source_routes(self, app: web.Application) -> None:
        """Each source's ROUTES, answered by the instance running when a request comes (sources
        restart on reload; the app does not)."""
        for name, cls in source_registry().items():
            for method, path, attr in cls.ROUTES:
                app.router.add_route(method, path, self._route_to(name, attr))

    def _route_to(self, name: str, attr: str) -> Callable[[web.Request], Any]:
        async def handler(request: web.Request) -> web.StreamResponse:
            entry = self.sources.get(name)
            if entry is None:
                raise json_error(404, f"source {name!r} is not running on this daemon")
            response: web.StreamResponse = await getattr(entry[0], attr)(request)
            return response

        return handler

    async def _stop_http(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._guard is not None:
            self._guard.close_all()  # connections still in their handshake are not aiohttp's
            self._guard = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def run_forever(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(self.reload()))
        await self.start()
        await self._stop.wait()
        log.info("stopping")
        await self.stop()

    def request_stop(self) -> None:
        self._stop.set()

    async def stop(self) -> None:
        tasks = [t for _, t, _ in self.sources.values()] + self._tasks
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_GRACE_SECONDS)
        self._tasks.clear()
        await asyncio.gather(*(src.close() for src, _, _ in self.sources.values()),
                             *(s.close() for s in self.services), return_exceptions=True)
        self.sources.clear()
        await self._stop_http()

    # -- sources -----------------------------------------------------------------------------

    def _role(self, config: Config) -> str:
        if config.role != "auto":
            role: str = config.role  # one of the schema's choices
            return role
        roles = {cls.role for name, cls in source_registry().items() if cls.wanted(config.sources[name])}
        if roles == {"node", "fabric"}:
            return "both"
        return roles.pop() if roles else "node"

    def _source_key(self, name: str, config: Config) -> SourceKey:
        return (repr(config.sources[name]), config.interval, config.state_dir)

    def _start_sources(self, config: Config, only: set[str] | None = None) -> None:
        ctx = SourceContext(store=self.store, interval=config.interval, hostname=self.state.hostname,
                            options=self.source_options, state_dir=config.state_dir)
        for name, cls in source_registry().items():
            if only is not None and name not in only:
                continue
            section = config.sources[name]
            if not cls.wanted(section):
                continue
            source = cls(section, ctx)
            task = asyncio.create_task(self._run_source(source), name=f"source:{name}")
            self.sources[name] = (source, task, self._source_key(name, config))

    async def _run_source(self, source: Source[Any]) -> None:
        # run() handles data problems itself; this guards against bugs so one source cannot
        # take the daemon down: it is restarted after a pause instead.
        while True:
            try:
                await source.run()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("source crashed; restarting in 5s", extra={"source": source.name})
                self.store.record_failure(source.name, source.name, "crashed", f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(5)

    async def _stop_sources(self, names: set[str]) -> None:
        stopping = [self.sources.pop(n) for n in names if n in self.sources]
        for _, task, _ in stopping:
            task.cancel()
        if stopping:
            await asyncio.wait([t for _, t, _ in stopping], timeout=STOP_GRACE_SECONDS)
        for src, _, _ in stopping:
            await src.close()
            self.store.remove_source(src.name)

    # -- reload ------------------------------------------------------------------------------

    async def reload(self) -> bool:
        async with self._reload_lock:
            if not self.config_path:
                log.warning("SIGHUP ignored: the daemon runs without a config file")
                return False
            try:
                new = config_mod.load_file(self.config_path)
            except config_mod.ConfigError as exc:
                self.state.reload_successful = False
                log.error("config reload failed; keeping the running config", extra={"error": str(exc)})
                return False
            await self.apply_config(new)
            self.state.reload_successful = True
            self.state.last_reload_success = time.time()
            log.info("config reloaded", extra={"file": self.config_path, "sources": sorted(self.sources)})
            return True

    async def apply_config(self, new: Config) -> None:
        changed = {name for name in source_registry()
                   if name in self.sources and self.sources[name][2] != self._source_key(name, new)}
        wanted = {name for name, cls in source_registry().items() if cls.wanted(new.sources[name])}
        await self._stop_sources(changed | (set(self.sources) - wanted))
        for source, _, _ in self.sources.values():  # the unchanged ones re-read their files
            await source.on_reload()
        old_listen = self.listen
        self.config = new
        self.state.role = self._role(new)
        if new.hostname:
            self.state.hostname = new.hostname
        self._start_sources(new, only=wanted - set(self.sources))
        for service in self.services:
            service.reload(new)
        if self.listen != old_listen and self._runner is not None:
            await self._stop_http()
            await self._start_http()


def compose_services(config: Config, store: Store, hostname: str) -> list[Service]:
    """The services the config enables, wired to each other: the inspections read the health
    reports, so they run only with health."""
    out: list[Service] = []
    health_cfg = config.health
    if not health_cfg.enabled:
        return out
    reports: Channel[Report] = Channel()
    interval = health_cfg.interval or config.interval
    out.append(HealthService(store, health_cfg, hostname, interval, reports))
    if config.inspect.enabled:
        out.append(InspectionService(store, reports, config.inspect, config.state_dir, hostname,
                                     interval))
    return out


def run_async(main: Callable[[], Any]) -> int:
    """Run `main()` (a coroutine function) to completion: 0 on a clean stop, 1 when the daemon
    cannot run (e.g. its port is taken), with the reason logged."""
    try:
        asyncio.run(main())
        return 0
    except RuntimeError as exc:
        log.error(str(exc))
        return 1
    except KeyboardInterrupt:
        return 0
