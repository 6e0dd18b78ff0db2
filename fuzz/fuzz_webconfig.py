"""atheris harness: the web surfaces an unauthenticated client or an operator's edit reaches.

    python fuzz/fuzz_webconfig.py -max_total_time=600 [CORPUS_DIR ...]

The first byte picks the target, the rest is its input:

  0  the web config file (--web.config.file): any bytes; the TLS section may name real,
     junk, empty or missing certificate files (written once under a scratch directory)
  1  an Authorization header value (latin-1 decoded, as aiohttp hands it over)
  2  a POST /api/v1/scenarios body

Contracts: WebSecurity or WebConfigError naming the file; parse_basic_auth gives (str, bytes)
or None; parse_json_object gives a dict of the declared fields and types or JsonInputError.

Seed with the shipped web config examples and some bodies:
    mkdir -p /tmp/corpus-web && printf '\\x02{"name": "pfc-storm", "active": false}' > /tmp/corpus-web/body
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["infrapulse"]):
    from infrapulse import webconfig
    from infrapulse.http import JsonInputError, parse_json_object
    from infrapulse.simulate.demo import SCENARIO_FIELDS

WORK = Path(tempfile.mkdtemp(prefix="infrapulse-fuzz-web-"))
CONFIG = WORK / "web.yaml"


def _setup_files() -> None:
    from infrapulse.simulate.certs import make_test_pki

    pki = make_test_pki(WORK / "pki")
    # Relative names in the fuzzed file resolve against its directory: give them targets.
    for name, source in (("server.pem", pki.server_cert), ("key.pem", pki.server_key),
                         ("ca.pem", pki.ca_file)):
        (WORK / name).write_bytes(source.read_bytes())
    (WORK / "junk.pem").write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")


def _web_config(data: bytes) -> None:
    CONFIG.write_bytes(data)
    try:
        security = webconfig.WebSecurity(CONFIG)
    except webconfig.WebConfigError as exc:
        assert str(exc).startswith(f"{CONFIG}: "), exc
        return
    assert (security.ssl_context is None) == (not security.config.tls)


def _header(data: bytes) -> None:
    parsed = webconfig.parse_basic_auth(data.decode("latin-1"))
    if parsed is not None:
        assert isinstance(parsed[0], str) and isinstance(parsed[1], bytes)


def _scenario_body(data: bytes) -> None:
    try:
        body = parse_json_object(data, SCENARIO_FIELDS)
    except JsonInputError:
        return
    assert set(body) <= set(SCENARIO_FIELDS) and isinstance(body["name"], str)
    assert isinstance(body.get("active", True), bool)


TARGETS = (_web_config, _header, _scenario_body)


def test_one_input(data: bytes) -> None:
    if not data:
        return
    TARGETS[data[0] % len(TARGETS)](data[1:])


def main() -> None:
    _setup_files()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
