"""Switch telemetry over gNMI: one grpc.aio Subscribe session per switch.

Each switch this instance owns (see `infrapulse.sources.gnmi.shard`) gets its own task: connect (TLS unless
`insecure: true`), call Capabilities to pick the best encoding its profile allows, open one
STREAM Subscribe per profile stream (SAMPLE / ON_CHANGE per path), and feed every notification
into the switch's `SwitchState`, whose live snapshot the store serves. A switch that is down,
refuses us, or stalls only affects its own task: it reconnects with capped, jittered backoff
while the others stream on, and /metrics never waits for any of them.

Credentials are read from an environment variable or a file at each connect, sent as the gNMI
`username` / `password` gRPC metadata, and never logged or exported: error text from the
switch is scrubbed of them before it is recorded.

Only pygnmi's generated stubs are imported: a process can load exactly one gNMI stub set. They
build every request and call Capabilities; Subscribe responses are taken as raw bytes and decoded
with `gnmi_wire`'s views of the same messages (a private descriptor pool, no second stub set),
which let a sample of counters go into the store in a few C calls (see `gnmi_ingest`).
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import yaml
from google.protobuf.message import DecodeError
from pygnmi.spec.v080 import gnmi_pb2 as pb
from pygnmi.spec.v080 import gnmi_pb2_grpc as pb_grpc

from ...backoff import Backoff
from ...schema import AutoBool, Bool, Duration, Int, ListOf, SchemaError, Section, Str
from ..base import Source, SourceContext, stale_after
from . import shard as shard_mod
from . import wire
from .ingest import SwitchState
from .paths import to_proto
from .profile import Profile, ProfileError, StreamSpec, load_profiles

SUBSCRIBE_METHOD = "/gnmi.gNMI/Subscribe"
ENCODING_ENUM = {"proto": pb.PROTO, "json": pb.JSON, "json_ietf": pb.JSON_IETF}
MODE_ENUM = {"sample": pb.SAMPLE, "on_change": pb.ON_CHANGE, "target_defined": pb.TARGET_DEFINED}
HOUSEKEEPING_SECONDS = 1.0


# -- config -----------------------------------------------------------------------------------


def _connection_fields(inherit: bool) -> dict:
    """Per-switch settings; under `targets[]` every one defaults to "inherit from defaults"."""

    def d(value):
        return None if inherit else value

    return {
        "port": Int("gNMI port used when an address has none.", default=d(9339), min=1, max=65535),
        "profile": Str("Path profile: a built-in (openconfig, sonic, nvidia-cumulus, arista-eos) or a "
                       "file name in profiles_dir.", default=d("openconfig")),
        "sample_interval": Duration("Interval of SAMPLE subscriptions that do not set their own (minimum 1s).",
                                    default=d("10s"), min=1.0),
        "encoding": Str("Value encoding; auto picks the profile's first choice the switch supports "
                        "(Capabilities).", default=d("auto"), choices=("auto", "proto", "json_ietf", "json")),
        "insecure": Bool("Plaintext gRPC. Without it every connection uses TLS.", default=d(False)),
        "tls": Section(doc="TLS settings (ignored with insecure: true).", fields={
            "ca_file": Str("PEM CA bundle that signed the switch certificate (default: system roots)."),
            "cert_file": Str("PEM client certificate, for switches that require mutual TLS."),
            "key_file": Str("PEM private key of cert_file."),
            "server_name": Str("Name to verify the switch certificate against, when it differs from the "
                               "address (an IP, a load balancer)."),
        }),
        "username": Str("gNMI username (not a secret; prefer username_env / username_file for consistency)."),
        "username_env": Str("Environment variable holding the gNMI username."),
        "username_file": Str("File holding the gNMI username."),
        "password_env": Str("Environment variable holding the gNMI password (never logged)."),
        "password_file": Str("File holding the gNMI password (e.g. a mounted secret; never logged)."),
        "connect_timeout": Duration("Timeout of the connect + Capabilities handshake.", default=d("10s"),
                                    min=0.1),
        "keepalive": Duration("HTTP/2 keepalive ping interval: detects a dead connection.",
                              default=d("30s"), min=1.0),
        "stall_timeout": Duration("Reconnect when a stream with SAMPLE subscriptions sends nothing for this "
                                  "long (default: 3 sample intervals, at least 10s)."),
    }


def _target_section() -> Section:
    return Section(doc="One switch.", fields={
        "name": Str("Switch name: the `switch` label and the sharding key.", required=True,
                    pattern=r"[A-Za-z0-9_.:/-]+"),
        "address": Str("host:port (or host, then `port` applies). Default: the name."),
        **_connection_fields(inherit=True),
    })


TARGET = _target_section()


def _check(section: dict, path: str) -> None:
    """Cross-field validation, so `infrapulse check-config` also validates profiles and targets."""
    try:
        profiles = load_profiles(section["profiles_dir"])
    except ProfileError as exc:
        raise SchemaError(f"{path}.profiles_dir", str(exc)) from None
    targets = list(enumerate(section["targets"]))
    where = {i: f"{path}.targets[{i}]" for i, _ in targets}
    if section["targets_file"]:
        try:
            file_targets = read_targets_file(section["targets_file"])
        except TargetsFileError as exc:
            raise SchemaError(f"{path}.targets_file", str(exc)) from None
        base = len(targets)
        for j, t in enumerate(file_targets):
            targets.append((base + j, t))
            where[base + j] = f"{section['targets_file']}: targets[{j}]"
    _check_connection(section["defaults"], f"{path}.defaults", profiles)
    seen: dict[str, str] = {}
    for i, target in targets:
        if target["name"] in seen:
            raise SchemaError(f"{where[i]}.name", f"duplicate switch name {target['name']!r} "
                                                  f"(also at {seen[target['name']]})")
        seen[target["name"]] = where[i]
        _check_connection(merge_target(section["defaults"], target), where[i], profiles)
    shard = section["shard"]
    if (shard["index"] is None) != (shard["count"] is None):
        raise SchemaError(f"{path}.shard", "set both index and count (or neither)")
    if shard["count"] is not None and not 0 <= shard["index"] < shard["count"]:
        raise SchemaError(f"{path}.shard.index", f"must be in 0..{shard['count'] - 1}, got {shard['index']}")


def _check_connection(conn: dict, where: str, profiles: dict[str, Profile]) -> None:
    if conn["profile"] not in profiles:
        raise SchemaError(f"{where}.profile", f"unknown profile {conn['profile']!r} "
                                              f"(known: {', '.join(sorted(profiles))})")
    profile = profiles[conn["profile"]]
    if conn["encoding"] != "auto" and conn["encoding"] not in profile.encodings:
        raise SchemaError(f"{where}.encoding", f"profile {profile.name} speaks {', '.join(profile.encodings)}")
    tls = conn["tls"]
    if bool(tls["cert_file"]) != bool(tls["key_file"]):
        raise SchemaError(f"{where}.tls", "cert_file and key_file go together")
    if sum(bool(conn[k]) for k in ("username", "username_env", "username_file")) > 1:
        raise SchemaError(where, "set at most one of username, username_env, username_file")
    if conn["password_env"] and conn["password_file"]:
        raise SchemaError(where, "set at most one of password_env, password_file")


CONFIG = Section(
    doc="Switch telemetry over gNMI (the fabric role). See docs/gnmi.md.",
    check=_check,
    fields={
        "enabled": AutoBool("auto: on when targets or targets_file are configured."),
        "defaults": Section(doc="Settings every switch inherits unless it overrides them.",
                            fields=_connection_fields(inherit=False)),
        "targets": ListOf("Switches to subscribe to.", item=TARGET, default=[]),
        "targets_file": Str("YAML file with more targets (a list, or {targets: [...]}); re-read when it "
                            "changes (checked every second, so also after SIGHUP)."),
        "profiles_dir": Str("Directory of extra profile files (*.yaml); a file named like a built-in "
                            "profile replaces it."),
        "shard": Section(doc="This instance's share of the switches: those with hashmod(name, count) == "
                             "index. Default: INFRAPULSE_SHARD_INDEX/_COUNT, or the StatefulSet ordinal.",
                         fields={"index": Int("This instance's shard, 0..count-1.", min=0),
                                 "count": Int("Number of fabric instances sharing the switches.", min=1)}),
        "max_series": Int("Most live series one switch may hold; new series past it are dropped and "
                          "counted in infrapulse_switch_series_dropped_total.", default=50_000, min=1),
        "retry_max": Duration("Longest pause between reconnect attempts (capped exponential backoff).",
                              default="60s", min=1.0),
    },
)


class TargetsFileError(Exception):
    pass


def read_targets_file(path: str) -> list[dict]:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise TargetsFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise TargetsFileError(f"{path}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    if isinstance(data, dict) and set(data) <= {"targets"}:
        data = data.get("targets")
    if data is None:
        return []
    if not isinstance(data, list):
        raise TargetsFileError(f"{path}: expected a list of targets (or {{targets: [...]}})")
    out = []
    for i, item in enumerate(data):
        try:
            out.append(TARGET.validate(item, f"targets[{i}]"))
        except SchemaError as exc:
            raise TargetsFileError(f"{path}: {exc}") from None
    return out


def merge_target(defaults: dict, target: dict) -> dict:
    """A target's effective settings: its own values over the defaults (tls key by key)."""
    merged = dict(defaults)
    for key, value in target.items():
        if key == "tls":
            merged["tls"] = {k: (v if v is not None else defaults["tls"][k]) for k, v in value.items()}
        elif value is not None:
            merged[key] = value
    merged["name"] = target["name"]
    address = target.get("address") or target["name"]
    if not _has_port(address):
        address = f"{address}:{merged['port']}"
    merged["address"] = address
    return merged


def _has_port(address: str) -> bool:
    if address.startswith("["):
        return "]:" in address
    return address.count(":") == 1 and address.rsplit(":", 1)[1].isdigit()


# -- connection errors ------------------------------------------------------------------------


class SessionError(Exception):
    """A session ended; `reason` is the short code shown as the source status reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


_TLS_MARKERS = ("ssl", "tls", "handshake", "certificate", "tsi_", "x509")


def classify(exc: BaseException, secrets: tuple[str, ...] = ()) -> tuple[str, str]:
    """(reason, message) for a failed session, with any secret scrubbed from the message."""
    if isinstance(exc, SessionError):
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


# -- one switch -------------------------------------------------------------------------------


@dataclass
class Credentials:
    username: str = ""
    password: str = ""

    def metadata(self) -> tuple[tuple[str, str], ...]:
        if not (self.username or self.password):
            return ()
        return (("username", self.username), ("password", self.password))


def _read_secret(env: str | None, file: str | None, what: str) -> str:
    if env:
        value = os.environ.get(env)
        if value is None:
            raise SessionError("credentials", f"{what}: environment variable {env} is not set")
        return value.strip()
    if file:
        try:
            return Path(file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise SessionError("credentials", f"{what}: cannot read {file}: {exc.strerror or exc}") from None
    return ""


def read_credentials(conn: dict) -> Credentials:
    username = conn["username"] or _read_secret(conn["username_env"], conn["username_file"], "username")
    password = _read_secret(conn["password_env"], conn["password_file"], "password")
    return Credentials(username, password)


def _read_pem(path: str | None, what: str) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise SessionError("tls", f"cannot read {what} {path}: {exc.strerror or exc}") from None


def open_channel(conn: dict) -> grpc.aio.Channel:
    keepalive_ms = int(conn["keepalive"] * 1000)
    options = [
        ("grpc.keepalive_time_ms", keepalive_ms),
        ("grpc.keepalive_timeout_ms", max(1000, keepalive_ms // 3)),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.max_receive_message_length", 64 * 1024 * 1024),
        # Fixed 64 KiB flow-control windows instead of BDP-probed ones: with hundreds of streams
        # the probed windows (megabytes each) dominate memory, and telemetry needs no more.
        ("grpc.http2.bdp_probe", 0),
        # reconnects are ours (with backoff); a fresh channel per session keeps state simple
        ("grpc.enable_retries", 0),
    ]
    if conn["insecure"]:
        return grpc.aio.insecure_channel(conn["address"], options=options)
    tls = conn["tls"]
    creds = grpc.ssl_channel_credentials(
        root_certificates=_read_pem(tls["ca_file"], "tls.ca_file"),
        private_key=_read_pem(tls["key_file"], "tls.key_file"),
        certificate_chain=_read_pem(tls["cert_file"], "tls.cert_file"))
    if tls["server_name"]:
        options.append(("grpc.ssl_target_name_override", tls["server_name"]))
    return grpc.aio.secure_channel(conn["address"], creds, options=options)


def _error_message(raw: bytes) -> str:
    try:
        return pb.Error.FromString(raw).message
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

    def __init__(self, source: GnmiSource, conn: dict, profile: Profile) -> None:
        self.source = source
        self.conn = conn
        self.name: str = conn["name"]
        self.profile = profile
        self.state = SwitchState(self.name, profile, source.config["max_series"], source.store, source.name)
        self.backoff = Backoff(initial=1.0, cap=source.config["retry_max"])
        intervals = profile.sample_intervals(conn["sample_interval"])
        heartbeats = [s.heartbeat_interval for st in profile.streams for s in st.subscriptions
                      if s.heartbeat_interval]
        longest = max(intervals + heartbeats, default=conn["sample_interval"])
        # A stream is only expected to talk regularly if it has SAMPLE paths or heartbeats.
        self.expects_traffic = bool(intervals or heartbeats)
        self.stall_timeout: float = conn["stall_timeout"] or max(3 * longest, 10.0)
        self.sweep_period = max(intervals, default=longest)
        self.stale_after = stale_after(longest)
        self.encoding = ""
        self.ever_synced = False
        self.down_since = time.time()
        self._next_sweep = time.monotonic() + self.sweep_period
        self._cleared = True
        self._last_rx_mono = 0.0
        self.task: asyncio.Task | None = None
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
                                               timeout=self.conn["connect_timeout"])
                supported = list(caps.supported_encodings)
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                supported = []  # Capabilities is optional on some targets
            self.encoding = choose_encoding(supported, self.profile, self.conn["encoding"])
            await self._stream_all(channel, metadata)
        finally:
            await channel.close(grace=None)

    async def _stream_all(self, channel: grpc.aio.Channel, metadata) -> None:
        self.state.begin_session()
        streams = self.profile.streams
        calls = []
        # Responses arrive as raw bytes: `_read` decodes them with the bulk wire view
        # (gnmi_wire) instead of the stub's full SubscribeResponse parse.
        subscribe = channel.stream_stream(SUBSCRIBE_METHOD, request_serializer=pb.SubscribeRequest.SerializeToString,
                                          response_deserializer=None)
        # The request side is written once and left open (half-closing ends some switches'
        # streams). Writing on the call, rather than handing grpc an endless request generator,
        # leaves no consumer task behind to be torn down on every reconnect.
        for stream in streams:
            request = subscribe_request(stream, self.encoding, self.conn["sample_interval"])
            call = subscribe(metadata=metadata)
            calls.append(call)
            await call.write(request)
        synced = [False] * len(calls)
        self._last_rx_mono = time.monotonic()
        tasks = [asyncio.create_task(self._read(call, i, synced)) for i, call in enumerate(calls)]
        tasks.append(asyncio.create_task(self._watchdog(synced)))
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            for call in calls:
                call.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()

    async def _read(self, call, index: int, synced: list[bool]) -> None:
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
        self.source.store.record_success(self.source.name, self.name, 0.0)
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
            self.source.store.record_success(self.source.name, self.name, 0.0)
        elif not self._cleared and now - max(state.last_rx, self.down_since) > self.stale_after:
            state.clear_data()
            self._cleared = True
        mono = time.monotonic()
        if mono >= self._next_sweep:
            self._next_sweep = mono + self.sweep_period
            state.sweep()


# -- the source -------------------------------------------------------------------------------


class GnmiSource(Source):
    name = "gnmi"
    role = "fabric"
    CONFIG = CONFIG

    def __init__(self, config: dict, ctx: SourceContext) -> None:
        super().__init__(config, ctx)
        self.sessions: dict[str, SwitchSession] = {}
        self.profiles: dict[str, Profile] = {}
        self.shard = shard_mod.Shard()
        self._targets_file_stamp: tuple | None = None

    @classmethod
    def wanted(cls, config: dict) -> bool:
        enabled = config.get("enabled", "auto")
        if enabled == "auto":
            return bool(config.get("targets") or config.get("targets_file"))
        return enabled is True

    async def run(self) -> None:
        self.profiles = load_profiles(self.config["profiles_dir"])
        try:
            self.shard = shard_mod.resolve(self.config["shard"], os.environ, self.ctx.hostname)
        except shard_mod.ShardError as exc:
            self.store.record_failure(self.name, "shard", "config", str(exc))
            self.log.error("cannot determine this instance's shard", extra={"error": str(exc)})
            return
        try:
            await self.reload_targets()
            while True:
                await asyncio.sleep(HOUSEKEEPING_SECONDS)
                if self._targets_file_changed():
                    await self.reload_targets()
                now = time.time()
                for session in self.sessions.values():
                    session.housekeeping(now)
        finally:
            await self.close()

    def wanted_targets(self) -> list[dict]:
        targets = list(self.config["targets"])
        if self.config["targets_file"]:
            self._targets_file_stamp = self._stamp()
            try:
                targets += read_targets_file(self.config["targets_file"])
                self.store.status.pop((self.name, "targets_file"), None)
            except TargetsFileError as exc:
                # keep the switches we have rather than dropping the whole fabric on a typo
                self.store.record_failure(self.name, "targets_file", "config", str(exc))
                self.log.error("targets_file unreadable; keeping the current switches", extra={"error": str(exc)})
                return [s.conn for s in self.sessions.values()]
        merged = {}
        for target in targets:
            conn = merge_target(self.config["defaults"], target)
            merged[conn["name"]] = conn
        return [c for c in merged.values() if self.shard.owns(c["name"])]

    async def on_reload(self) -> None:
        await self.reload_targets()

    async def reload_targets(self) -> None:
        """Start sessions for new switches, stop removed ones, restart changed ones."""
        wanted = {c["name"]: c for c in self.wanted_targets()}
        for name in [n for n, s in self.sessions.items() if n not in wanted or wanted[n] != s.conn]:
            await self.sessions.pop(name).stop()
            self.store.remove(self.name, name)
        for name, conn in wanted.items():
            if name in self.sessions:
                continue
            profile = self.profiles.get(conn["profile"])
            if profile is None:
                self.store.record_failure(self.name, name, "config", f"unknown profile {conn['profile']!r}")
                continue
            session = SwitchSession(self, conn, profile)
            self.sessions[name] = session
            session.start()
        self.log.info("gnmi targets", extra={"switches": len(self.sessions), "shard": str(self.shard)})

    def _stamp(self) -> tuple | None:
        try:
            st = os.stat(self.config["targets_file"])
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _targets_file_changed(self) -> bool:
        return bool(self.config["targets_file"]) and self._stamp() != self._targets_file_stamp

    async def close(self) -> None:
        sessions, self.sessions = list(self.sessions.values()), {}
        await asyncio.gather(*(s.stop() for s in sessions), return_exceptions=True)


SOURCE = GnmiSource

__all__ = ["SOURCE", "GnmiSource", "CONFIG", "classify", "merge_target", "read_targets_file"]
