"""The mesh probe packet and the responder's decisions (sources/probe/mesh_wire.py), including a
hypothesis fuzz: the responder never answers an unlisted address, never answers anything but a
well-formed request, never sends more bytes than it received, and keeps to its rate limit."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infrapulse.sources.probe import mesh_wire as wire

LISTED = ("127.0.0.2", "10.0.1.12", "fd00::12")
UNLISTED = ("127.0.0.9", "10.0.1.13", "fd00::13", "::ffff:10.0.1.13")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def responder(rate: float = 10.0, burst: float = 20.0,
              total_rate: float = 2000.0) -> tuple[wire.Responder, Clock]:
    clock = Clock()
    r = wire.Responder(rate=rate, burst=burst, total_rate=total_rate, clock=clock)
    r.allow(LISTED)
    return r, clock


def test_request_layout_and_round_trip() -> None:
    data = wire.encode_request(0xDEADBEEF, 42, 64)
    assert len(data) == 64
    assert data[:4] == b"IPMP" and data[4] == 1 and data[5] == wire.REQUEST
    assert struct.unpack_from("!IQQ", data, 8) == (0xDEADBEEF, 42, 0)
    assert data[wire.HEADER_SIZE:] == bytes(64 - 28)
    assert wire.decode(data) == wire.Probe(wire.REQUEST, 0xDEADBEEF, 42, 0)
    with pytest.raises(ValueError, match="outside 28..1472"):
        wire.encode_request(1, 1, 27)


def test_reply_is_the_request_with_kind_and_dwell() -> None:
    request = wire.encode_request(7, 9, 100)
    reply = wire.make_reply(request, 123_456)
    assert len(reply) == len(request)
    assert wire.decode(reply) == wire.Probe(wire.REPLY, 7, 9, 123_456)
    assert reply[:5] == request[:5] and reply[6:20] == request[6:20] and reply[28:] == request[28:]
    assert wire.decode(wire.make_reply(request, -5)).dwell_ns == 0  # type: ignore[union-attr]


def test_a_late_notice_is_the_replys_header_with_kind_late() -> None:
    reply = wire.make_reply(wire.encode_request(7, 9, 1472), 123_456)
    notice = wire.late_notice(reply)
    assert len(notice) == wire.HEADER_SIZE
    assert wire.decode(notice) == wire.Probe(wire.LATE, 7, 9, 0)
    assert notice[:5] == reply[:5] and notice[6:20] == reply[6:20]


def test_answers_a_listed_peer_and_never_an_unlisted_one() -> None:
    r, _ = responder()
    request = wire.encode_request(1, 1, 64)
    reply = r.answer(request, "127.0.0.2")
    assert reply is not None and wire.decode(reply) == wire.Probe(wire.REPLY, 1, 1, 0)
    wire.stamp_dwell(reply, 500)
    assert wire.decode(reply) == wire.Probe(wire.REPLY, 1, 1, 500)
    assert r.answer(request, "127.0.0.9") is None
    assert r.answer(request, "::ffff:127.0.0.2") is not None  # one address, two spellings
    assert r.outcomes == {"unlisted": 1}  # answered/send_failed are counted by the sender (send_reply)


def test_never_answers_replies_short_or_foreign_datagrams() -> None:
    r, _ = responder()
    request = wire.encode_request(1, 1, 64)
    reply = wire.make_reply(request, 0)
    for data in (reply, wire.late_notice(reply), request[:27], b"GET / HTTP/1.1\r\n\r\n" * 3,
                 b"IPMP\x02" + request[5:], request[:5] + b"\x04" + request[6:], bytes(1473)):
        assert r.answer(data, "127.0.0.2") is None
    assert r.outcomes == {"malformed": 7}
    assert r.answer(request, "not-an-address") is None
    assert r.outcomes == {"malformed": 8}


def test_rate_limit_per_peer_and_in_total() -> None:
    r, clock = responder(rate=2.0, burst=5.0)
    request = wire.encode_request(1, 1, 64)
    answered = [r.answer(request, "127.0.0.2") is not None for _ in range(10)]
    assert answered == [True] * 5 + [False] * 5
    assert r.answer(request, "10.0.1.12") is not None  # another peer has its own bucket
    clock.now += 1.0  # two more tokens
    assert [r.answer(request, "127.0.0.2") is not None for _ in range(3)] == [True, True, False]
    assert r.outcomes == {"rate_limited": 6}

    # all peers together: 3/s with a burst of 3, though each peer alone could send 2 at once
    total, clock = responder(rate=100.0, burst=2.0, total_rate=3.0)
    assert [total.answer(request, ip) is not None for ip in LISTED * 3] == [True] * 3 + [False] * 6
    clock.now += 1.0
    assert [total.answer(request, ip) is not None for ip in LISTED * 2] == [True] * 3 + [False] * 3


def test_allow_replaces_the_list_and_forgets_buckets() -> None:
    r, _ = responder(rate=1.0, burst=1.0)
    request = wire.encode_request(1, 1, 64)
    assert r.answer(request, "127.0.0.2") is not None
    assert r.answer(request, "127.0.0.2") is None  # bucket empty
    r.allow(["127.0.0.3"])
    assert r.answer(request, "127.0.0.2") is None and r.outcomes["unlisted"] == 1
    r.allow(["127.0.0.2"])
    assert r.answer(request, "127.0.0.2") is not None  # a fresh, full bucket


# -- fuzz ------------------------------------------------------------------------------------

valid_requests = st.builds(wire.encode_request, st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1),
                           st.integers(wire.HEADER_SIZE, wire.MAX_SIZE))
mutated = st.tuples(valid_requests, st.integers(0, 27), st.integers(0, 255)).map(
    lambda t: t[0][:t[1]] + bytes([t[2]]) + t[0][t[1] + 1:])
datagrams = st.one_of(st.binary(max_size=1600), valid_requests, mutated,
                      valid_requests.map(lambda d: bytes(wire.make_reply(d, 0))),
                      valid_requests.map(lambda d: wire.late_notice(wire.make_reply(d, 0))))
sources = st.sampled_from(LISTED + UNLISTED + ("", "garbage", "127.0.0.2%lo"))


@settings(max_examples=400, deadline=None)
@given(data=datagrams, source=sources, delay=st.integers(-10**9, 10**12))
def test_fuzz_one_datagram(data: bytes, source: str, delay: int) -> None:
    r, _ = responder()
    reply = r.answer(data, source)
    if reply is None:
        return
    wire.stamp_dwell(reply, delay)
    assert wire.normalize_ip(source) in {wire.normalize_ip(a) for a in LISTED}, "answered an unlisted peer"
    assert len(reply) == len(data), "a reply is never larger (nor smaller) than its request"
    request, answer = wire.decode(data), wire.decode(reply)
    assert request is not None and request.kind == wire.REQUEST, "answered something that is no request"
    assert answer is not None and answer.kind == wire.REPLY, "a reply can never trigger another responder"
    assert (answer.token, answer.seq) == (request.token, request.seq)
    assert answer.dwell_ns == max(delay, 0)


@settings(max_examples=150, deadline=None)
@given(traffic=st.lists(st.tuples(datagrams, sources, st.floats(0, 0.5)), max_size=120))
def test_fuzz_a_stream_never_sends_more_than_it_received(traffic: list[tuple[bytes, str, float]]) -> None:
    r, clock = responder(rate=10.0, burst=20.0)
    received: dict[str, int] = {}
    sent: dict[str, int] = {}
    with_notices: dict[str, int] = {}  # as if every reply were followed by a late notice
    answers: dict[str, int] = {}
    start = clock.now
    for data, source, gap in traffic:
        clock.now += gap
        received[source] = received.get(source, 0) + len(data)
        reply = r.answer(data, source)
        if reply is not None:
            sent[source] = sent.get(source, 0) + len(reply)
            with_notices[source] = with_notices.get(source, 0) + len(reply) + len(wire.late_notice(reply))
            answers[source] = answers.get(source, 0) + 1
    for source, n in sent.items():
        assert n <= received[source], f"{source}: sent {n} bytes for {received[source]} received"
        assert with_notices[source] <= 2 * received[source], "late notices at most double the bytes"
    for source in UNLISTED + ("", "garbage"):
        assert source not in sent
    elapsed = clock.now - start
    by_ip: dict[str, int] = {}
    for source, n in answers.items():
        key = wire.normalize_ip(source)
        by_ip[key] = by_ip.get(key, 0) + n
    for ip, n in by_ip.items():
        assert n <= 20 + 10 * elapsed + 1e-9, f"{ip}: {n} answers in {elapsed:.2f}s exceeds the token bucket"
