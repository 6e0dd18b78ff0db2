"""Property tests for the perftest-server request validator: any body is either a request
within the configured limits or a RequestError(400) naming why, never another exception; a
valid body reads back to exactly what was sent."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infrapulse.sources.probe.peer_server import REQUEST_FIELDS, TESTS, Limits, RequestError, parse_request

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIMITS = Limits(port_min=18600, port_max=18631, max_size=1 << 20, max_iterations=5000,
                iterations={"ib_write_lat": 1000, "ib_write_bw": 5000})

JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                           | st.text(max_size=12),
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
KEYS = st.sampled_from([*REQUEST_FIELDS, "extra_args", "Test", "timeout", ""]) | st.text(max_size=8)
BODIES = st.dictionaries(KEYS, JSON_VALUES | st.sampled_from([*TESTS, "mlx5_0", 8, 18600, 100]),
                         max_size=6)


def _check(raw: bytes) -> None:
    try:
        req = parse_request(raw, LIMITS)
    except RequestError as exc:
        assert exc.status == 400 and str(exc)
        return
    assert req.test in TESTS
    assert 1 <= req.size <= LIMITS.max_size and 10 <= req.iterations <= LIMITS.max_iterations
    assert req.port is None or LIMITS.port_min <= req.port <= LIMITS.port_max
    assert req.device and all(c.isalnum() or c in "_.-" for c in req.device)
    assert set(json.loads(raw)) <= set(REQUEST_FIELDS)


@SETTINGS
@given(BODIES)
def test_any_object_is_a_request_within_limits_or_a_400(body: dict[str, Any]) -> None:
    _check(json.dumps(body).encode())


@SETTINGS
@given(st.binary(max_size=200) | JSON_VALUES.map(lambda v: json.dumps(v).encode()))
def test_any_bytes_are_a_request_or_a_400(raw: bytes) -> None:
    _check(raw)


@SETTINGS
@given(st.sampled_from(TESTS), st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,20}", fullmatch=True),
       st.none() | st.integers(LIMITS.port_min, LIMITS.port_max), st.integers(1, LIMITS.max_size),
       st.integers(10, LIMITS.max_iterations))
def test_a_valid_body_reads_back_exactly(test: str, device: str, port: int | None, size: int,
                                         iterations: int) -> None:
    body: dict[str, Any] = {"test": test, "device": device, "size": size, "iterations": iterations}
    if port is not None:
        body["port"] = port
    req = parse_request(json.dumps(body).encode(), LIMITS)
    assert (req.test, req.device, req.port) == (test, device, port)
    assert (req.size, req.iterations) == (size, iterations)


@SETTINGS
@given(st.sampled_from(["size", "iterations", "port"]),
       st.one_of(st.booleans(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5),
                 st.integers(-10**6, 9)))
def test_numbers_out_of_range_or_of_another_type_are_refused(key: str, value: Any) -> None:
    body = {"test": "ib_write_lat", "device": "mlx5_0", key: value}
    try:
        parse_request(json.dumps(body).encode(), LIMITS)
    except RequestError as exc:
        assert exc.status == 400 and repr(key) in str(exc)
        return
    assert key == "size" and isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 9
