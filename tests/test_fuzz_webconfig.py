"""Property tests for the web surfaces (issue 19, item 8): the web config loader (YAML and the
certificate files it names), the Authorization header, and JSON API bodies. Whatever arrives,
the outcome is a documented one, never an exception escaping. fuzz/fuzz_webconfig.py checks
the same contracts with atheris for as long as it is let run."""

from __future__ import annotations

import asyncio
import atexit
import base64
import json
import shutil
import tempfile
from pathlib import Path

import bcrypt
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infrapulse import webconfig
from infrapulse.http import JsonInputError, parse_json_object
from infrapulse.simulate.certs import make_test_pki
from infrapulse.simulate.demo import SCENARIO_FIELDS

WORK = Path(tempfile.mkdtemp(prefix="infrapulse-fuzz-web-"))  # the strategies below name its files
atexit.register(shutil.rmtree, WORK, ignore_errors=True)
PKI = make_test_pki(WORK / "pki")
(WORK / "junk.pem").write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
(WORK / "empty.pem").write_text("")
FILES = [str(PKI.server_cert), str(PKI.server_key), str(PKI.ca_file), str(PKI.client_key),
         str(WORK / "junk.pem"), str(WORK / "empty.pem"), str(WORK / "missing.pem"), str(WORK)]
GOOD_HASH = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20),
                    st.sampled_from(FILES + [GOOD_HASH, "$2b$04$short", "NoClientCert",
                                             "RequireAndVerifyClientCert",
                                             "VerifyClientCertIfGiven", "TLS12", "TLS13", "TLS10"]))
keys = st.sampled_from(["tls_server_config", "cert_file", "key_file", "client_ca_file", "client_auth_type",
                        "min_version", "max_version", "basic_auth_users", "http_server_config", "prom", "x"])
documents = st.recursive(scalars, lambda children: st.one_of(
    st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=6)), max_leaves=25)


def _load_or_fail_cleanly(path: Path) -> None:
    """The contract: a WebSecurity (TLS context built from the named files), or WebConfigError
    naming the file."""
    try:
        security = webconfig.WebSecurity(path)
    except webconfig.WebConfigError as exc:
        assert str(exc).startswith(f"{path}: "), exc
        return
    assert isinstance(security.config.users, dict)
    assert (security.ssl_context is None) == (not security.config.tls)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_any_web_config_document_loads_or_fails_naming_the_file(doc):
    path = WORK / "web.yaml"
    path.write_text(yaml.safe_dump(doc))
    _load_or_fail_cleanly(path)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_as_a_web_config_file(data):
    path = WORK / "web-bytes.yaml"
    path.write_bytes(data)
    _load_or_fail_cleanly(path)


def test_a_complete_tls_config_from_the_fuzzed_shape_loads():
    """The generator can reach success: this document is one it can build."""
    path = WORK / "web-good.yaml"
    path.write_text(yaml.safe_dump({"tls_server_config": {"cert_file": str(PKI.server_cert),
                                                          "key_file": str(PKI.server_key)},
                                    "basic_auth_users": {"prom": GOOD_HASH}}))
    security = webconfig.WebSecurity(path)
    assert security.ssl_context is not None and set(security.config.users) == {"prom"}


headers = st.one_of(
    st.text(max_size=120),
    st.binary(max_size=120).map(lambda b: "Basic " + base64.b64encode(b).decode()),
    st.tuples(st.text(max_size=20), st.text(max_size=100)).map(
        lambda up: "Basic " + base64.b64encode(f"{up[0]}:{up[1]}".encode()).decode()))


@settings(max_examples=300, deadline=None)
@given(headers)
def test_any_authorization_header_parses_or_is_refused(header):
    parsed = webconfig.parse_basic_auth(header)
    if parsed is not None:
        user, password = parsed
        assert isinstance(user, str) and isinstance(password, bytes)
        assert header.startswith("Basic ")


@pytest.fixture(scope="module")
def security():
    path = WORK / "web-auth.yaml"
    path.write_text(f"basic_auth_users:\n  prom: {GOOD_HASH}\n")
    return webconfig.WebSecurity(path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(headers)
def test_only_the_right_credential_is_authorized(security, monkeypatch, header):
    # Unknown users cost a cost-10 bcrypt by design; a cheap hash keeps the test fast.
    monkeypatch.setattr(webconfig, "UNKNOWN_USER_HASH", bcrypt.hashpw(b"?", bcrypt.gensalt(rounds=4)))
    ok = asyncio.run(security._authorized(header))
    assert ok == (webconfig.parse_basic_auth(header) == ("prom", b"pw"))


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=10)),
    lambda children: st.one_of(st.lists(children, max_size=3),
                               st.dictionaries(st.sampled_from(["name", "active", "duration", "x"]), children,
                                               max_size=4)), max_leaves=10)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=80), json_values.map(lambda v: yaml.safe_dump(v).encode()),
                 json_values.map(lambda v: json.dumps(v).encode())))
def test_any_scenario_body_is_the_documented_shape_or_refused(raw):
    try:
        body = parse_json_object(raw, SCENARIO_FIELDS)
    except JsonInputError as exc:
        assert str(exc)
        return
    assert set(body) <= {"name", "active", "duration"} and isinstance(body["name"], str)
    assert isinstance(body.get("active", True), bool)
    assert body.get("duration") is None or (type(body["duration"]) in (int, float))
