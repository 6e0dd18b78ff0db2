"""textparse against prometheus_client's parsers, cold and through the steady-state fast path.

Inputs: every serving fixture, every real capture under ../shared/real/serving/ (vLLM, SGLang,
TGI, Triton, trtllm-serve, dcgm-exporter) and node_exporter's, and what the simulators serve.
Each is parsed three ways — cold (no cache), with a `ParseCache` filled by an earlier scrape,
and again after every value changed (NaN, ±Inf, huge, negative) — and must give the same
families and samples as prometheus_client (values incl. NaN, labels with escapes, timestamps).
"""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families
from prometheus_client.parser import text_string_to_metric_families

from helpers import real
from infrapulse.simulate.dcgm_exporter import GpuExposition
from infrapulse.simulate.nvml_fake import FakeNvml
from infrapulse.simulate.serving_engines import ENGINE_VARIANTS, EngineServer
from infrapulse.textparse import ParseCache, ParseError, parse

FIXTURES = Path(__file__).parent / "fixtures" / "serving"
REAL_SERVING = sorted(p.name for p in real("serving").glob("*.prom"))
SIM_VARIANTS = ENGINE_VARIANTS


def _simulated(variant: str) -> str:
    clock = [0.0]
    server = EngineServer(variant, dp_ranks=2 if variant == "vllm" else 1, clock=lambda: clock[0])
    clock[0] = 30.0
    server.advance()
    return server.render()


def _inputs() -> list[tuple[str, str, bool]]:
    """(id, text, openmetrics) of everything the parser is held to."""
    out = [(f"fixture:{p.name}", p.read_text(), p.suffix == ".txt") for p in sorted(FIXTURES.iterdir())]
    out += [(f"real:{name}", real("serving", name).read_text(), False) for name in REAL_SERVING]
    out.append(("real:node_exporter-1.5.0.prom",
                real("node", "node_exporter", "node_exporter-1.5.0.prom").read_text(), False))
    out += [(f"sim:{variant}", _simulated(variant), False) for variant in SIM_VARIANTS]
    out.append(("sim:dcgm-exporter", GpuExposition(FakeNvml.from_file()).render(), False))
    return out


INPUTS = _inputs()


def _same(a: float | None, b: float | None) -> bool:
    return a == b or (a is not None and b is not None and math.isnan(a) and math.isnan(b))


def _ours(text: str, openmetrics: bool, cache: ParseCache | None = None) -> list[tuple]:
    """(family, type, sample name, labels, value, timestamp) in order, named as prometheus_client
    names them (see _theirs)."""
    rows = []
    for fam in parse(text, openmetrics, cache).values():
        typ = "unknown" if fam.type == "untyped" else fam.type
        for s in fam.samples:
            name = s.name
            if not openmetrics and fam.type == "counter" and not name.endswith(("_total", "_created")):
                name += "_total"  # prometheus_client appends _total to a bare counter sample; we keep it
            rows.append((fam.name, typ, name, s.labels, s.value, s.timestamp))
    return rows


def _theirs(text: str, openmetrics: bool) -> list[tuple]:
    families = om_families(text) if openmetrics else text_string_to_metric_families(text)
    rows = []
    for fam in families:
        for s in fam.samples:
            ts = s.timestamp
            if ts is not None and not isinstance(ts, float):
                ts = ts.sec + ts.nsec / 1e9  # OpenMetrics Timestamp
            rows.append((fam.name, fam.type, s.name, s.labels, s.value, ts))
    return rows


def _assert_rows_equal(mine: list[tuple], theirs: list[tuple]) -> None:
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        if a[2] != b[2] and a[2].replace(":", "_") == b[2]:
            # `# TYPE vllm:x` over samples written `vllm_x` (prometheus_client's OpenMetrics
            # encoder): we give the samples the declared name and family (module docstring);
            # prometheus_client makes each an `unknown` family of its escaped name.
            assert (b[0], b[1]) == (b[2], "unknown") and a[3] == b[3]
        else:
            assert a[:4] == b[:4]
        assert _same(a[4], float(b[4])), (a, b)
        assert _same(a[5], b[5]), (a, b)


_VALUE = re.compile(r"^([^#\s][^\n]*?[ \t])([^ \t\n#]+)$", re.M)


def _new_values(text: str, seed: int) -> str:
    """The same exposition with every sample's value replaced (the next scrape)."""
    rng = random.Random(seed)
    choices = ["NaN", "+Inf", "-Inf", "0", "-1.5", "1e+308", "3.0e-05", "123456789012345678", "7"]
    return _VALUE.sub(lambda m: m.group(1) + rng.choice(choices), text)


@pytest.mark.parametrize(("name", "text", "openmetrics"), INPUTS, ids=[i[0] for i in INPUTS])
def test_agrees_with_prometheus_client_cold_and_warm(name, text, openmetrics):
    theirs = _theirs(text, openmetrics)
    assert theirs, f"{name}: prometheus_client found no samples"
    _assert_rows_equal(_ours(text, openmetrics), theirs)
    cache = ParseCache()
    _ours(text, openmetrics, cache)
    assert cache.heads, f"{name}: nothing was cached for the fast path"
    _assert_rows_equal(_ours(text, openmetrics, cache), theirs)  # every line through the fast path
    for seed in range(3):
        changed = _new_values(text, seed)
        assert changed != text
        _assert_rows_equal(_ours(changed, openmetrics, cache), _theirs(changed, openmetrics))


def test_the_fast_path_takes_every_line_of_a_steady_engine():
    text = _simulated("vllm")
    cache = ParseCache()
    parse(text, label_cache=cache)
    heads = dict(cache.heads)
    parse(_new_values(text, 1), label_cache=cache)
    assert cache.heads == heads  # no new head: each line of the second scrape hit the cache
    samples = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    assert len(heads) == samples


def test_fast_path_cases_that_must_take_the_full_path():
    cache = ParseCache()
    parse('x{a="1"} 1\ny 2\n', label_cache=cache)
    # A tab between value and timestamp: the text after the last blank is "1\t17", not a number.
    fams = parse('x{a="1"} 1\t17000\n', label_cache=cache)
    assert fams["x"].samples[0][2:] == (1.0, 17.0)
    # A timestamp after a cached head: the head before the last blank is not a cached one.
    fams = parse('y 2 1700000000000\n', label_cache=cache)
    assert fams["y"].samples[0][2:] == (2.0, 1700000000.0)
    # A '#' in the value: an exemplar is never read as the sample's value.
    fams = parse('x{a="1"} 5 # {t="a"} 9\n# EOF\n', openmetrics=True, label_cache=cache)
    assert fams["x"].samples[0].value == 5.0
    assert not any("#" in head for head in cache.heads)
    fams = parse('x{a="1"} 6 # {t="a"} 9\n# EOF\n', openmetrics=True, label_cache=cache)
    assert fams["x"].samples[0].value == 6.0
    # A bad number after a cached head is still a ParseError naming its line.
    with pytest.raises(ParseError) as err:
        parse('y 2\nx{a="1"} 1x\n', label_cache=cache)
    assert err.value.lineno == 2
    # Content after # EOF is refused even when the line would hit the cache.
    with pytest.raises(ParseError) as err:
        parse('x{a="1"} 1\n# EOF\nx{a="1"} 2\n', openmetrics=True, label_cache=cache)
    assert err.value.lineno == 3


def test_family_grouping_is_the_same_through_the_fast_path():
    text = ("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n"
            "other 4\nh_sum 5\n# TYPE c counter\nc_total 1\nc_created 2\nc 3\n")
    cache = ParseCache()
    cold = parse(text)
    parse(text, label_cache=cache)
    warm = parse(text, label_cache=cache)
    assert [(f.name, f.type, f.samples) for f in warm.values()] == \
           [(f.name, f.type, f.samples) for f in cold.values()]
    assert [s.name for s in warm["h"].samples] == ["h_bucket", "h_bucket", "h_sum", "h_count"]
    assert [s.name for s in warm["other"].samples] == ["other"]
    assert [s.value for s in warm["h_sum"].samples] == [5.0]  # an untyped family of its own name


def test_label_cache_limit_bounds_heads(monkeypatch):
    import infrapulse.textparse as textparse

    monkeypatch.setattr(textparse, "LABEL_CACHE_LIMIT", 10)
    cache = ParseCache()
    text = "".join(f'x{{i="{i}"}} {i}\n' for i in range(50))
    fams = parse(text, label_cache=cache)
    assert len(cache.heads) <= 10 and len(cache.labels) <= 10
    assert [s.labels["i"] for s in fams["x"].samples] == [str(i) for i in range(50)]


# Label values with everything the format escapes or that looks like syntax.
_label_values = st.text(alphabet=st.sampled_from(list('ab \\"\n{},=#\t:é')), max_size=8)
_values = st.sampled_from(["1", "0", "-2.5", "NaN", "+Inf", "-Inf", "1e+30", "17"])


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["a", "b", "le", "model_name"]), _label_values, max_size=3),
                min_size=1, max_size=6, unique_by=lambda d: tuple(sorted(d.items()))),
       st.lists(_values, min_size=12, max_size=12))
def test_escaped_labels_agree_cold_warm_and_with_prometheus_client(label_sets, values):
    def exposition(offset: int) -> str:
        lines = ["# TYPE m gauge"]
        for i, labels in enumerate(label_sets):
            body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            lines.append(f"m{{{body}}} {values[(i + offset) % len(values)]}")
        return "\n".join(lines) + "\n"

    cache = ParseCache()
    for offset in range(3):  # first scrape fills the cache, the next ones take the fast path
        text = exposition(offset)
        theirs = _theirs(text, False)
        _assert_rows_equal(_ours(text, False, cache), theirs)
        _assert_rows_equal(_ours(text, False), theirs)
        assert [row[3] for row in theirs] == label_sets
