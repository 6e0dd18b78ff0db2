"""Which gNMI profile fits a switch: one Get per mapping, counted with the daemon's own ingest.

A profile's mappings are its `metrics` entries. Each is probed through the first subscribed path
that covers it (so a profile costs at most one Get per mapping, usually fewer: one container
path covers several leaves), with the profile's encoding and a timeout. The replies go through a
throwaway `SwitchState`, the code the daemon runs, so "answered" means a mapping got a series.
A switch without Get (Cumulus has Capabilities and Subscribe only) is asked with a Subscribe ONCE
per path instead, and the row says so.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2 as pb
from pygnmi.spec.v080 import gnmi_pb2_grpc as pb_grpc

from ..deadline import within
from ..sources.gnmi.ingest import SwitchState
from ..sources.gnmi.paths import PathPattern, to_proto
from ..sources.gnmi.profile import Profile, StreamSpec
from ..sources.gnmi.session import ENCODING_ENUM, SessionError, choose_encoding

CONCURRENCY = 8  # RPCs in flight per switch
GET, ONCE = "a Get", "a Subscribe ONCE (the switch has no Get)"


def probe_paths(profile: Profile) -> list[tuple[StreamSpec, str]]:
    """(stream, path) to ask for: per mapping the subscription that delivers it, deduplicated.

    Of the subscriptions that may hold a mapping's leaves, the one whose last element names the
    mapping's leaf wins (SONiC's per-field paths, COUNTERS/Ethernet*/<FIELD>, all look alike up
    to there), else the first."""
    subs = [(st, s.path, PathPattern(s.path, profile.strip_modules)) for st in profile.streams
            for s in st.subscriptions]
    out: dict[tuple[str, str, str], tuple[StreamSpec, str]] = {}
    for rule in profile.rules:
        covering = [(st, path, pattern) for st, path, pattern in subs if pattern.may_contain(rule.pattern)]
        if not covering:
            continue
        leaf = rule.pattern.elems[-1][0]
        named = [c for c in covering if len(c[2]) < len(rule.pattern) and c[2].elems[-1][0].kind == "literal"
                 and leaf.match(c[2].elems[-1][0].text, {})]
        stream, path, _ = (named or covering)[0]
        out.setdefault((stream.origin, stream.target, path), (stream, path))
    return list(out.values())


def mapping_count(profile: Profile) -> int:
    return len({rule.index for rule in profile.rules})


@dataclass
class Fit:
    profile: str
    mappings: int
    answered: int = 0
    encoding: str = ""  # "" when the switch speaks none of the profile's encodings
    missing_models: list[str] = field(default_factory=list)

    def answers(self) -> str:
        return f"{self.profile} answers {self.answered} of {self.mappings}"


class Asker:
    """One switch's Get (or Subscribe ONCE) calls: whether it has Get is learnt from the first."""

    def __init__(self, stub: pb_grpc.gNMIStub, metadata: tuple[tuple[str, str], ...], timeout: float) -> None:
        self.stub = stub
        self.metadata = metadata
        self.timeout = timeout
        self.has_get: bool | None = None
        self.errors: list[str] = []
        self._first = asyncio.Lock()
        self._slots = asyncio.Semaphore(CONCURRENCY)

    @property
    def via(self) -> str:
        return ONCE if self.has_get is False else GET

    async def ask(self, stream: StreamSpec, path: str, encoding: str) -> list[Any]:
        async with self._slots:
            if self.has_get is None:
                async with self._first:
                    if self.has_get is None:
                        return await self._get_or_learn(stream, path, encoding)
            if self.has_get:
                return await self._guarded(self._get(stream, path, encoding))
            return await self._guarded(self._once(stream, path, encoding))

    async def _get_or_learn(self, stream: StreamSpec, path: str, encoding: str) -> list[Any]:
        try:
            notes = await self._get(stream, path, encoding)
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                self.has_get = True  # it has Get; this path is what it refused
                self.errors.append(f"{exc.code().name}: {exc.details()}")
                return []
            self.has_get = False
            return await self._guarded(self._once(stream, path, encoding))
        self.has_get = True
        return notes

    async def _guarded(self, call: Any) -> list[Any]:
        try:
            result: list[Any] = await call
        except (grpc.aio.AioRpcError, asyncio.TimeoutError) as exc:
            code = exc.code().name if isinstance(exc, grpc.aio.AioRpcError) else "timeout"
            self.errors.append(code)
            return []
        return result

    async def _get(self, stream: StreamSpec, path: str, encoding: str) -> list[Any]:
        request = pb.GetRequest(prefix=pb.Path(origin=stream.origin, target=stream.target),
                                path=[to_proto(path)], encoding=ENCODING_ENUM[encoding])
        response = await self.stub.Get(request, metadata=self.metadata, timeout=self.timeout)
        return list(response.notification)

    async def _once(self, stream: StreamSpec, path: str, encoding: str) -> list[Any]:
        request = pb.SubscribeRequest(subscribe=pb.SubscriptionList(
            prefix=pb.Path(origin=stream.origin, target=stream.target),
            subscription=[pb.Subscription(path=to_proto(path))], mode=pb.SubscriptionList.ONCE,
            encoding=ENCODING_ENUM[encoding]))
        call = self.stub.Subscribe(iter([request]), metadata=self.metadata, timeout=self.timeout)
        try:
            return await within(self._until_sync(call), self.timeout)
        finally:
            call.cancel()

    @staticmethod
    async def _until_sync(call: Any) -> list[Any]:
        notes: list[Any] = []
        async for response in call:
            if response.sync_response:
                break
            if response.HasField("update"):
                notes.append(response.update)
        return notes


async def fit(asker: Asker, profile: Profile, supported: list[int], announced: set[str],
              encoding: str = "auto", name: str = "doctor") -> Fit:
    """How many of `profile`'s mappings this switch answers."""
    result = Fit(profile.name, mapping_count(profile),
                 missing_models=[m for m in profile.models if announced and m not in announced])
    try:
        result.encoding = choose_encoding(supported, profile, encoding)
    except SessionError:
        return result
    replies = await asyncio.gather(*(asker.ask(stream, path, result.encoding)
                                     for stream, path in probe_paths(profile)))
    state = SwitchState(name, profile)
    try:
        for notes in replies:
            for note in notes:
                state.apply(note)
        state.on_sync()  # values held for the port table are applied now
        result.answered = len(state.mapped_rules())
    finally:
        state.release()
    return result


def best(fits: list[Fit]) -> list[Fit]:
    """Profiles that answered anything, best first: most mappings, then the larger share."""
    found = [f for f in fits if f.answered]
    return sorted(found, key=lambda f: (-f.answered, -f.answered / f.mappings, f.profile))
