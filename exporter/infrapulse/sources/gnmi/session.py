"""One switch's gNMI session: connect, pick the encoding, subscribe, stream, reconnect.

Each switch this instance owns gets a `SwitchSession` task: open a channel (see `channel`), call
Capabilities to pick the best encoding its profile allows, open one STREAM Subscribe per profile
stream (SAMPLE / ON_CHANGE per path), and feed every notification into the switch's
`SwitchState`, whose live snapshot the store serves. A switch that is down, refuses us, or stalls
only affects its own task: it reconnects with capped, jittered backoff while the others stream
on, and /metrics never waits for any of them. Error text from the switch is scrubbed of the
credentials before it is recorded (`classify`).

Only pygnmi's generated stubs are imported: a process can load exactly one gNMI stub set. They
build every request and call Capabilities; Subscribe responses are taken as raw bytes and decoded
with `wire`'s views of the same messages (a private descriptor pool, no second stub set), which
let a sample of counters go into the store in a few C calls (see `ingest`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

import grpc
from google.protobuf.message import DecodeError
from pygnmi.spec.v080 import gnmi_pb2 as pb
from pygnmi.spec.v080 import gnmi_pb2_grpc as pb_grpc

from ...backoff import Backoff
from ...store import Store, stale_after
from . import wire
from .channel import ChannelSetupError, Credentials, open_channel, read_credentials
from .config import GnmiSettings, SwitchSettings
from .ingest import SwitchState
from .paths import to_proto
from .profile import Profile, StreamSpec


class SessionOwner(Protocol):
    """What a session reads of the source that owns it (source.GnmiSource)."""

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> GnmiSettings: ...

    @property
    def store(self) -> Store: ...

    @property
    def log(self) -> logging.Logger: ...

SUBSCRIBE_METHOD = "/gnmi.gNMI/Subscribe"
ENCODING_ENUM = {"proto": pb.PROTO, "json": pb.JSON, "json_ietf": pb.JSON_IETF}
MODE_ENUM = {"sample": pb.SAMPLE, "on_change": pb.ON_CHANGE, "target_defined": pb.TARGET_DEFINED}
# Some switches (NVIDIA Cumulus) refuse a Subscribe set up while another one is being set up,
# with CANCELLED "System is busy": that stream is retried soon, within the session.
BUSY_RETRY_INITIAL = 0.2
BUSY_RETRY_CAP = 2.0
# Codes with which a switch refuses a path set it does not serve: an optional stream is skipped.
REFUSED_CODES = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.NOT_FOUND,
                 grpc.StatusCode.FAILED_PRECONDITION)


def is_busy(exc: BaseException) -> bool:
    """A switch saying it cannot set a subscription up right now (not that it refuses it)."""
    return (isinstance(exc, grpc.aio.AioRpcError) and exc.code() == grpc.StatusCode.CANCELLED
            and "busy" in (exc.details() or "").lower())


class SessionError(Exception):
    """A session ended; `reason` is the short code shown as the source status reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


_TLS_MARKERS = ("ssl", "tls", "handshake", "certificate", "tsi_", "x509")


def classify(exc: BaseException, secrets: tuple[str, ...] = ()) -> tuple[str, str]:
    """(reason, message) for a failed session, with any secret scrubbed from the message."""
    if isinstance(exc, (SessionError, ChannelSetupError)):
        reason, message = exc.reason, exc.message
    elif isinstance(exc, grpc.aio.AioRpcError):
        code, details = exc.code(), exc.details() or ""
        lowered = details.lower()
        if code == grpc.StatusCode.UNAUTHENTICATED:
            reason, message = "unauthenticated", f"the switch rejected the credentials: {details}"
        elif code == grpc.StatusCode.PERMISSION_DENIED:
            reason, message = "permission_denied", f"the switch denied access: {details}"
        elif code == grpc.StatusCode.UNAVAILABLE and any(m in lowered for m in _TLS_MARKERS):
            reason = "tls"
            message = f"TLS handshake failed (check tls.ca_file, tls.server_name, client cert): {details}"
        elif code == grpc.StatusCode.UNAVAILABLE:
            reason, message = "unavailable", f"cannot reach the switch: {details}"
        elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
            reason, message = "timeout", f"no answer within connect_timeout: {details}"
        elif code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNIMPLEMENTED,
                      grpc.StatusCode.NOT_FOUND):
            reason, message = "rejected", f"the switch rejected the subscription ({code.name}): {details}"
        else:
            reason, message = "error", f"{code.name}: {details}"
    elif isinstance(exc, OSError):
        reason, message = "error", f"{type(exc).__name__}: {exc.strerror or exc}"
    else:
        reason, message = "error", f"{type(exc).__name__}: {exc}"
    for secret in secrets:
        if secret:
            message = message.replace(secret, "<redacted>")
    return reason, message[:500]


def _error_message(raw: bytes) -> str:
    try:
        return str(pb.Error.FromString(raw).message)
    except DecodeError:
        return "(undecodable error message)"


def choose_encoding(supported: list[int], profile: Profile, override: str) -> str:
    """The profile's most preferred encoding the switch announced (JSON if it announced none)."""
    wanted = [override] if override != "auto" else profile.encodings
    if not supported:
        return wanted[0]
    for name in wanted:
        if ENCODING_ENUM[name] in supported:
            return name
    names = ", ".join(pb.Encoding.Name(e) for e in supported)
    raise SessionError("encoding", f"the switch supports {names}; profile {profile.name} needs one of "
                                   f"{', '.join(wanted)}")


def subscribe_request(stream: StreamSpec, encoding: str, sample_interval: float) -> pb.SubscribeRequest:
    subs = []
    for spec in stream.subscriptions:
        sub = pb.Subscription(path=to_proto(spec.path), mode=MODE_ENUM[spec.mode],
                              suppress_redundant=spec.suppress_redundant)
        if spec.mode == "sample":
            sub.sample_interval = int((spec.sample_interval or sample_interval) * 1e9)
        if spec.heartbeat_interval:
            sub.heartbeat_interval = int(spec.heartbeat_interval * 1e9)
        subs.append(sub)
    prefix = pb.Path(origin=stream.origin, target=stream.target)
    return pb.SubscribeRequest(subscribe=pb.SubscriptionList(
        prefix=prefix, subscription=subs, mode=pb.SubscriptionList.STREAM,
        encoding=ENCODING_ENUM[encoding]))


class SwitchSession:
    """Keeps one switch's streams up and its state fresh; owned by `GnmiSource`."""

    def __init__(self, source: SessionOwner, conn: SwitchSettings, profile: Profile) -> None:
        self.source = source
        self.conn = conn
        self.name: str = conn.name
        self.profile = profile
        self.state = SwitchState(self.name, profile, source.config.max_series, source.store, source.name)
        self.backoff = Backoff(initial=1.0, cap=source.config.retry_max)
        intervals = profile.sample_intervals(conn.sample_interval)
        heartbeats = [s.heartbeat_interval for st in profile.streams for s in st.subscriptions
                      if s.heartbeat_interval]
        longest = max(intervals + heartbeats, default=conn.sample_interval)
        # A stream is only expected to talk regularly if it has SAMPLE paths or heartbeats.
        self.expects_traffic = bool(intervals or heartbeats)
        self.stall_timeout: float = conn.stall_timeout or max(3 * longest, 10.0)
        self.sweep_period = max(intervals, default=longest)
        self.stale_after = stale_after(longest)
        self.encoding = ""
        self.ever_synced = False
        self.down_since = time.time()
        self._next_sweep = time.monotonic() + self.sweep_period
        self._cleared = True
        self._last_rx_mono = 0.0
        self.busy_retries = 0  # streams set up again after the switch said it was busy
        self.skipped: list[str] = []  # this session's optional streams the switch refused, why
        self.task: asyncio.Task[None] | None = None
        source.store.publish(source.name, self.name, self.state.snapshot, self.stale_after)

    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name=f"gnmi:{self.name}")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        self.state.release()

    async def run(self) -> None:
        store, log = self.source.store, self.source.log
        while True:
            secrets: tuple[str, ...] = ()
            try:
                creds = read_credentials(self.conn)
                secrets = (creds.password,)
                await self._session(creds)
                raise SessionError("disconnected", "the switch closed the stream")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # every failure becomes a reason; the loop never dies
                reason, message = classify(exc, secrets)
            self._mark_down()
            store.record_failure(self.source.name, self.name, reason, message)
            delay = self.backoff.delay()
            log.warning("gnmi session failed", extra={"switch": self.name, "reason": reason,
                                                      "detail": message, "retry_in": round(delay, 2)})
            await asyncio.sleep(delay)

    def _mark_down(self) -> None:
        if self.state.up:
            self.down_since = time.time()
        self.state.set_up(False)

    async def _session(self, creds: Credentials) -> None:
        metadata = creds.metadata()
        channel = open_channel(self.conn)
        try:
            stub = pb_grpc.gNMIStub(channel)
            try:
                caps = await stub.Capabilities(pb.CapabilityRequest(), metadata=metadata,
                                               timeout=self.conn.connect_timeout)
                supported = list(caps.supported_encodings)
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                supported = []  # Capabilities is optional on some targets
            self.encoding = choose_encoding(supported, self.profile, self.conn.encoding)
            await self._stream_all(channel, metadata)
        finally:
            await channel.close(grace=None)

    async def _stream_all(self, channel: grpc.aio.Channel, metadata: tuple[tuple[str, str], ...]) -> None:
        self.state.begin_session()
        self.skipped = []
        streams = self.profile.streams
        calls: list[Any] = [None] * len(streams)
        # Responses arrive as raw bytes: `_read` decodes them with the bulk wire view
        # (gnmi_wire) instead of the stub's full SubscribeResponse parse.
        subscribe: Any = channel.stream_stream(SUBSCRIBE_METHOD,
                                               request_serializer=pb.SubscribeRequest.SerializeToString,
                                               response_deserializer=None)
        synced = [False] * len(streams)
        self._last_rx_mono = time.monotonic()
        tasks = [asyncio.create_task(self._stream(subscribe, metadata, stream, i, calls, synced))
                 for i, stream in enumerate(streams)]
        tasks.append(asyncio.create_task(self._watchdog(synced)))
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            for call in calls:
                if call is not None:
                    call.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in done:
            error = None if task.cancelled() else task.exception()
            if error is not None:
                raise error

    async def _stream(self, subscribe: Any, metadata: tuple[tuple[str, str], ...], stream: StreamSpec,
                      index: int, calls: list[Any], synced: list[bool]) -> None:
        """One Subscribe RPC of the session; returns when the switch ends it.

        The request side is written once and left open (half-closing ends some switches'
        streams). Writing on the call, rather than handing grpc an endless request generator,
        leaves no consumer task behind to be torn down on every reconnect."""
        request = subscribe_request(stream, self.encoding, self.conn.sample_interval)
        busy = Backoff(initial=BUSY_RETRY_INITIAL, cap=BUSY_RETRY_CAP)
        started = time.monotonic()
        while True:
            call = calls[index] = subscribe(metadata=metadata)
            try:
                await call.write(request)
                await self._read(call, index, synced)
                return
            except grpc.aio.AioRpcError as exc:
                if synced[index]:
                    raise  # it was streaming: a real failure
                if is_busy(exc):
                    # Not a failure: the switch answered, and will take the stream shortly.
                    waited = time.monotonic() - started
                    if waited > self.stall_timeout:
                        raise SessionError("busy",
                                           f"the switch kept refusing a subscription for {waited:.0f}s: "
                                           f"{exc.details()}") from None
                    self.busy_retries += 1
                    pause = busy.delay()
                    # The pause is ours, not the switch's silence: the watchdog must not call it a stall.
                    self._last_rx_mono = time.monotonic() + pause
                    await asyncio.sleep(pause)
                    continue
                if stream.optional and exc.code() in REFUSED_CODES:
                    self._skip(stream, index, exc, synced)
                    await asyncio.get_running_loop().create_future()  # idle until the session ends
                raise

    def _skip(self, stream: StreamSpec, index: int, exc: grpc.aio.AioRpcError, synced: list[bool]) -> None:
        what = f"optional stream {stream.describe()} refused ({exc.code().name}): {exc.details()}"
        self.skipped.append(what[:300])
        self.source.log.warning("gnmi optional stream refused; going on without it",
                                extra={"switch": self.name, "detail": what})
        synced[index] = True
        if all(synced):
            self._on_synced()

    async def _read(self, call: Any, index: int, synced: list[bool]) -> None:
        state = self.state
        apply = state.apply_wire
        parse = wire.SubscribeResponse.FromString
        monotonic = time.monotonic
        async for raw in call:
            self._last_rx_mono = monotonic()
            try:
                resp = parse(raw)
            except DecodeError:  # damaged inside: the per-update path takes what is intact
                apply(None, raw)
                continue
            which = resp.WhichOneof("response")
            if which == "update":
                apply(resp.update, raw)
            elif which == "sync_response" and not synced[index]:
                synced[index] = True
                if all(synced):
                    self._on_synced()
            elif which == "error":
                raise SessionError("error", f"the switch reported an error: {_error_message(resp.error)}")

    def _on_synced(self) -> None:
        self.state.on_sync()
        self.state.set_up(True)
        self._cleared = False
        if self.ever_synced:
            self.state.count_reconnect()
        self.ever_synced = True
        self.backoff.reset()
        self.source.store.record_success(self.source.name, self.name, 0.0, self.skipped)
        self.source.log.info("gnmi stream synced", extra={"switch": self.name, "encoding": self.encoding})

    async def _watchdog(self, synced: list[bool]) -> None:
        period = min(1.0, self.stall_timeout / 4)
        while True:
            await asyncio.sleep(period)
            silent = time.monotonic() - self._last_rx_mono
            if silent > self.stall_timeout and (self.expects_traffic or not all(synced)):
                what = "before the initial sync" if not all(synced) else "on a SAMPLE stream"
                raise SessionError("stalled", f"no data for {silent:.1f}s {what} "
                                              f"(stall_timeout {self.stall_timeout:g}s)")

    def housekeeping(self, now: float) -> None:
        """Every second: keep the snapshot alive, expire stale series, refresh the status time."""
        state = self.state
        state.snapshot.timestamp = now
        if state.up:
            self.source.store.record_success(self.source.name, self.name, 0.0, self.skipped)
        elif not self._cleared and now - max(state.last_rx, self.down_since) > self.stale_after:
            state.clear_data()
            self._cleared = True
        mono = time.monotonic()
        if mono >= self._next_sweep:
            self._next_sweep = mono + self.sweep_period
            state.sweep()


__all__ = ["SUBSCRIBE_METHOD", "SessionError", "SwitchSession", "choose_encoding", "classify", "is_busy",
           "subscribe_request"]
