"""Property tests: whatever YAML arrives, the loader returns a config or a ConfigError, never a crash."""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infrapulse import config as config_mod
from infrapulse.schema import format_duration, parse_duration

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                    st.text(max_size=20),
                    st.sampled_from(["5s", "250ms", "5x", "auto", "0.0.0.0:9477", "[", "{"]))
keys = st.sampled_from(["listen", "interval", "role", "hostname", "sources", "health", "infiniband",
                        "ethtool", "gnmi", "serving", "nvml", "dcgm", "enabled", "endpoints", "targets",
                        "devices", "x"])
documents = st.recursive(scalars, lambda children: st.one_of(
    st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=5)), max_leaves=25)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_any_document_loads_or_fails_cleanly(doc):
    text = yaml.safe_dump(doc)
    try:
        cfg = config_mod.load_text(text, "fuzz.yaml")
    except config_mod.ConfigError as exc:
        assert str(exc).startswith("fuzz.yaml")
        assert exc.reason
    else:
        assert isinstance(cfg, config_mod.Config) and cfg.listen


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_any_text_loads_or_fails_cleanly(text):
    try:
        config_mod.load_text(text, "fuzz.yaml")
    except config_mod.ConfigError as exc:
        assert str(exc).startswith("fuzz.yaml")


@given(st.integers(min_value=1, max_value=10**6))
def test_duration_round_trip(ms):
    seconds = ms / 1000
    assert abs(parse_duration(format_duration(seconds)) - seconds) < 1e-9


@given(st.text(max_size=12))
def test_duration_parse_never_crashes(text):
    try:
        assert parse_duration(text) >= 0
    except ValueError:
        pass
