"""XID errors from NVML events, received by one dedicated thread.

nvmlEventSetWait blocks, so it gets its own thread instead of a slot in the poll. Each event
is delivered once per event set, and the watcher adds it to its counts once, under a lock; the
poller only reads copies of those counts. The event set is re-created only when the set of
GPUs changes: events queued in a set that is freed are lost, never replayed, so a restart
cannot count an XID twice.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from typing import Any

from ... import xid as xid_table
from . import nvml_api as api_mod
from .nvml_api import NvmlApi

# {uuid: (count per xid, last xid or 0, registered now)}
XidState = dict[str, tuple[dict[int, int], int, bool]]

WAIT_MS = 500  # how long one nvmlEventSetWait blocks: bounds how long stop() waits


class XidWatcher:
    def __init__(self, api: NvmlApi, log: logging.Logger | None = None, wait_ms: int = WAIT_MS) -> None:
        self.api = api
        self.log = log or logging.getLogger("infrapulse.source.nvml")
        self.wait_ms = wait_ms
        self._lock = threading.Lock()
        self._counts: dict[str, dict[int, int]] = {}
        self._last: dict[str, int] = {}
        self._watched: set[str] = set()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._devices: tuple[tuple[str, Any], ...] = ()
        self._uuid_by_handle: dict[int, str] = {}
        self.events_seen = 0  # every XID event counted, for tests and the status line
        self.error = ""  # why the watcher is not running, if it is not

    # -- control (from the poll thread) ------------------------------------------------------

    def ensure(self, devices: list[tuple[str, Any]]) -> None:
        """Watch exactly these (uuid, handle) GPUs; restart the thread only if they changed."""
        devices_key = tuple(sorted(((u, h) for u, h in devices if u), key=lambda d: d[0]))
        if self._thread is not None and self._thread.is_alive() and \
                [u for u, _ in devices_key] == [u for u, _ in self._devices]:
            return
        self.stop()
        self._devices = devices_key
        self._uuid_by_handle = {handle_key(h): u for u, h in devices_key}
        if not devices_key:
            return
        self._stop = threading.Event()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(devices_key, self._stop, ready),
                                        name="infrapulse-nvml-xid", daemon=True)
        self._thread.start()
        ready.wait(5.0)  # registrations done: the first poll already sees which GPUs are watched

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.wait_ms / 1000.0 + 2.0)
            self._thread = None
        with self._lock:
            self._watched = set()

    def state(self) -> XidState:
        """{uuid: (count per xid, last xid or 0, registered now)} for every GPU registered for
        XID events or with XIDs counted (a GPU lost since keeps its counts)."""
        with self._lock:
            return {uuid: (dict(self._counts.get(uuid, {})), self._last.get(uuid, 0), uuid in self._watched)
                    for uuid in self._watched | set(self._counts)}

    # -- the watcher thread -------------------------------------------------------------------

    def _run(self, devices: tuple[tuple[str, Any], ...], stop: threading.Event,
             ready: threading.Event) -> None:
        api = self.api
        try:
            event_set = api.event_set_create()
        except Exception as exc:
            self.error = f"nvmlEventSetCreate failed: {exc}"
            self.log.warning("XID events unavailable", extra={"error": str(exc)})
            ready.set()
            return
        try:
            watched: set[str] = set()
            for uuid, handle in devices:
                try:
                    api.register_xid_events(handle, event_set)
                    watched.add(uuid)
                except Exception as exc:
                    self.log.warning("cannot watch XID events of this GPU",
                                     extra={"gpu": uuid, "error": api_mod.code_name(api_mod.error_code(exc))})
            with self._lock:
                self._watched = watched
            self.error = "" if watched else "no GPU accepted XID event registration"
            ready.set()
            while watched and not stop.is_set():
                try:
                    event = api.event_set_wait(event_set, self.wait_ms)
                except Exception as exc:  # e.g. GpuIsLost while waiting: keep watching the others
                    self.log.warning("waiting for NVML events failed", extra={"error": str(exc)})
                    stop.wait(1.0)
                    continue
                if event is not None:
                    self._count(event)
        finally:
            ready.set()
            try:
                api.event_set_free(event_set)
            except Exception as exc:
                self.log.debug("nvmlEventSetFree failed", extra={"error": str(exc)})

    def _count(self, event: api_mod.XidEvent) -> None:
        # Known by its handle: no NVML call, and it works when the GPU already fell off the bus.
        uuid = self._uuid_by_handle.get(handle_key(event.device))
        if uuid is None:
            try:
                uuid = self.api.uuid(event.device)
            except Exception:
                uuid = ""
        with self._lock:
            per_gpu = self._counts.setdefault(uuid, {})
            per_gpu[event.xid] = per_gpu.get(event.xid, 0) + 1
            self._last[uuid] = event.xid
            self.events_seen += 1
        known = xid_table.BY_CODE.get(event.xid)
        critical = known is not None and known.xid_class == xid_table.CRITICAL
        log = self.log.error if critical else self.log.warning
        log("XID error", extra={"gpu": uuid, "xid": event.xid, "meaning": known.meaning if known else "",
                                "gpu_instance": gpu_instance_text(event.gpu_instance_id)})


def handle_key(handle: Any) -> int:
    """Identity of a device handle: NVML hands out new ctypes pointer objects for the same GPU."""
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value or 0
    except (TypeError, ctypes.ArgumentError):
        return id(handle)


NVML_NO_INSTANCE = 0xFFFFFFFF  # what NVML reports as the GPU instance of an event outside MIG


def gpu_instance_text(instance_id: int) -> str:
    """The GPU instance for the XID log line: its number under MIG, else "none"."""
    return "none" if instance_id == NVML_NO_INSTANCE else str(instance_id)
