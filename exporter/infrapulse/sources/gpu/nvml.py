"""Source `nvml`: GPU state through NVML (nvidia-ml-py), plus XID errors from NVML events.

Every poll runs in a worker thread (asyncio.to_thread) and returns one snapshot for the
target `nvml`; XID events are received by a dedicated thread (nvml_xid.XidWatcher). A lost
GPU does not fail the poll: it is reported with infrapulse_gpu_healthy 0 and a reason, the
other GPUs go on, and the source reports `partial`.

Without an NVML library (no driver, a CPU-only node):
- `enabled: auto` (the default): the source logs once why it is off and stops; it exports
  nothing, not even infrapulse_source_up, so CPU-only nodes raise no "source down" alert.
- `enabled: true`: the source is expected to work, so it reports infrapulse_source_up 0 with
  reason `no_nvml` and retries nvmlInit with a capped backoff.
Other start-up failures (driver not loaded, driver/library mismatch, no permission) report
source_up 0 with that reason and are retried under both settings.

When the `dcgm` source runs too, families that dcgm claims (`sources.dcgm.owns`) are left out
here; see gpu_families.Ownership.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ...backoff import Backoff
from ...schema import AutoBool, Bool, Duration, Int, Str, setting, settings
from ...store import Snapshot
from ..base import PollingSettings, PollingSource, SourceContext, TargetResult
from . import families as gpu_families
from .nvml_api import InitError, NvmlApi, RealNvml
from .nvml_poll import GpuPoller
from .nvml_xid import XidWatcher

TARGET = "nvml"


# SourceContext.options key: a callable(path) -> NvmlApi that opens the data-driven fake.
OPEN_FAKE_KEY = "nvml.open_fake"


@settings("GPUs through NVML (nvidia-ml-py): utilization, memory, power, energy, temperatures, clocks "
          "and throttle reasons, ECC, row remapping, PCIe, NVLink, MIG, XID events.")
@dataclass(kw_only=True, slots=True)
class NvmlSettings(PollingSettings):
    enabled: bool | str = setting(AutoBool(
        "auto: on when the NVML library loads; on a host without it the source logs why and "
        "stays off (no source_up series). true: a missing library is an error "
        "(infrapulse_source_up 0, reason no_nvml) and nvmlInit is retried. false: off."))
    interval: float | None = setting(Duration("Poll interval; defaults to the global interval.", min=0.1))
    xid_events: bool = setting(Bool("Watch XID errors with nvmlEventSetWait in a dedicated thread.",
                                    default=True))
    rescan_every: int = setting(Int("Re-enumerate the GPUs every this many polls (MIG layout changes, a GPU "
                                    "back after a reset).", default=12, min=1))
    fake: str = setting(Str(
        "Testing and demo only: path to a YAML description of GPUs (format: "
        "infrapulse/simulate/data/gpus.yaml). The data-driven NVML fake answers instead of the "
        "real library. Empty: use the real NVML.", default=""))


class NvmlSource(PollingSource[NvmlSettings]):
    name = "nvml"
    role = "node"
    CONFIG = NvmlSettings.SCHEMA

    def __init__(self, config: NvmlSettings, ctx: SourceContext) -> None:
        super().__init__(config, ctx)
        self.api: NvmlApi | None = None
        self.poller: GpuPoller | None = None
        self.watcher: XidWatcher | None = None
        self._poll_lock = threading.Lock()
        # Claimed before any source polls, so dcgm never exports what nvml is about to.
        gpu_families.ownership(self.store).nvml_running = True

    @classmethod
    def unavailable(cls, config: NvmlSettings) -> str:
        if config.fake:
            return ""  # the daemon's CLI injects the fake
        api = RealNvml()
        try:
            api.init()
        except InitError as exc:
            off = "; enabled: auto leaves the source off" if config.enabled == "auto" else ""
            return f"NVML does not load here ({exc.message}){off}"
        api.shutdown()
        return ""

    def _make_api(self) -> NvmlApi:
        if self.config.fake:
            # The fake lives in simulate/; the CLI or the demo injects its opener (OPEN_FAKE_KEY).
            open_fake: Callable[[str], NvmlApi] | None = self.ctx.options.get(OPEN_FAKE_KEY)
            if open_fake is None:
                raise InitError("no_fake", "sources.nvml.fake is set, but this daemon was given no NVML fake")
            return open_fake(self.config.fake)
        return RealNvml()

    async def run(self) -> None:
        backoff = Backoff(initial=5.0, cap=300.0)
        logged: set[str] = set()
        while True:
            try:
                await asyncio.to_thread(self._start)
                break
            except InitError as exc:
                if exc.reason == "no_nvml" and self.config.enabled == "auto":
                    self.log.info("NVML library not available; nvml source off on this host (enabled: auto)",
                                  extra={"reason": exc.reason, "detail": exc.message})
                    gpu_families.ownership(self.store).nvml_running = False
                    self.store.remove(self.name, TARGET)
                    return
                if exc.reason not in logged:
                    logged.add(exc.reason)
                    self.log.warning("NVML did not start; retrying", extra={"reason": exc.reason,
                                                                            "detail": exc.message})
                self.store.record_failure(self.name, TARGET, exc.reason, exc.message)
                await asyncio.sleep(backoff.delay())
        assert self.poller is not None  # _start() returned
        self.log.info("NVML started", extra={"gpus": len(self.poller.gpus),
                                             "driver": self.poller.driver_version,
                                             "xid_events": self.watcher is not None})
        await super().run()

    def _start(self) -> None:
        api = self._make_api()
        api.init()
        self.api = api
        self.poller = poller = GpuPoller(api, self.log, rescan_every=self.config.rescan_every)
        poller.enumerate()
        if self.config.xid_events:
            self.watcher = watcher = XidWatcher(api, self.log)
            _watch(watcher, poller)

    def _poll_blocking(self) -> tuple[Snapshot, list[str]] | None:
        if not self._poll_lock.acquire(blocking=False):
            return None  # the previous poll is still stuck in NVML; do not pile up threads
        try:
            poller, watcher = self.poller, self.watcher
            assert poller is not None  # collect() runs only after _start() returned
            xid_state = None
            if watcher is not None:
                _watch(watcher, poller)
                xid_state = watcher.state()
            return poller.poll(xid_state)
        finally:
            self._poll_lock.release()

    async def collect(self) -> list[TargetResult]:
        result = await asyncio.to_thread(self._poll_blocking)
        if result is None:
            return [TargetResult(TARGET, reason="busy", message="the previous NVML poll has not returned")]
        snap, errors = result
        ownership = gpu_families.ownership(self.store)
        ownership.filter(snap, ownership.nvml_exports)
        return [TargetResult(TARGET, snap, partial_errors=errors)]

    def default_target(self) -> str:
        return TARGET

    async def close(self) -> None:
        gpu_families.ownership(self.store).nvml_running = False
        await asyncio.to_thread(self._shutdown)

    def _shutdown(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
        if self.api is not None:
            try:
                self.api.shutdown()
            except Exception as exc:
                self.log.debug("nvmlShutdown failed", extra={"error": str(exc)})
            self.api = None


def _watch(watcher: XidWatcher, poller: GpuPoller) -> None:
    """Point the XID watcher at the GPUs the poller knows a handle for."""
    watcher.ensure([(g.uuid, g.handle) for g in poller.gpus if g.handle is not None])


SOURCE = NvmlSource
