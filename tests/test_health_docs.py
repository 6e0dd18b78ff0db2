"""docs/health.md stays in sync with the code: the generated signal table and PromQL, and the
prose sections naming every signal, XID class and API key."""

from __future__ import annotations

from pathlib import Path

from infrapulse import xid
from infrapulse.health import reference
from infrapulse.health.signals import SIGNALS

DOC = Path(__file__).resolve().parent.parent / "docs" / "health.md"


def test_generated_sections_are_current():
    text = DOC.read_text(encoding="utf-8")
    assert reference.render(text) == text, "run: python -m infrapulse.health.reference docs/health.md"


def test_every_signal_and_xid_class_is_documented():
    text = DOC.read_text(encoding="utf-8")
    for name, signal in SIGNALS.items():
        assert f"| {signal.component} | `{name}` |" in text
    xid_table = text.split("### XID classes", 1)[1].split("## Configuration", 1)[0]
    for x in xid.XIDS:
        assert f"| {x.code} | `{x.mnemonic}` |" in xid_table and f"| {x.xid_class} |" in xid_table, x.code


def test_documented_api_keys_exist():
    from health_fixtures import Feed, service_for

    feed = Feed()
    feed.counter("gnmi", "infrapulse_switch_queue_transmitted_packets_total", ("l", "e", "3"), 0, 100, "l")
    feed.counter("gnmi", "infrapulse_switch_queue_ecn_marked_packets_total", ("l", "e", "3"), 0, 50, "l")
    service = service_for(feed.store)
    feed.publish(service)
    body = service.as_json()
    text = DOC.read_text(encoding="utf-8")
    api = text.split("## `GET /api/v1/health`", 1)[1].split("## `infrapulse score`", 1)[0]
    for key in body:
        assert f'"{key}"' in api, key
    for key in body["components"][0]:
        assert f'"{key}"' in api, key
    for key in body["components"][0]["signals"][0]:
        assert f'"{key}"' in api, key
    for key in body["detractors"][0]:
        assert f'"{key}"' in api, key
