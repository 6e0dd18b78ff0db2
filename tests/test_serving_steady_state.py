"""The serving mapping in steady state: a ParseCache shares label dicts across scrapes and the
extractors memoise per series on them; the result must equal a cold parse + normalise, scrape
after scrape, and the memos must stay bounded when label dicts are not shared."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import pytest

from helpers import real
from infrapulse.simulate.serving_engines import ENGINE_VARIANTS, EngineServer
from infrapulse.sources.serving import normalize as norm
from infrapulse.sources.serving.extract import MEMO_SLACK, Context
from infrapulse.textparse import ParseCache, parse

FIXTURES = Path(__file__).parent / "fixtures" / "serving"
ENGINE_CAPTURES = [p.name for p in sorted(real("serving").glob("*.prom")) if not p.name.startswith("dcgm")]
_VALUE = re.compile(r"^([^#\s][^\n]*?[ \t])([^ \t\n#]+)$", re.M)


def _simulated(variant: str) -> str:
    clock = [0.0]
    server = EngineServer(variant, dp_ranks=3 if variant == "vllm" else 1, clock=lambda: clock[0])
    clock[0] = 45.0
    server.advance()
    return server.render()


def _inputs() -> list[tuple[str, str, bool]]:
    out = [(f"fixture:{p.name}", p.read_text(), p.suffix == ".txt") for p in sorted(FIXTURES.iterdir())]
    out += [(f"real:{name}", real("serving", name).read_text(), False) for name in ENGINE_CAPTURES]
    out += [(f"sim:{variant}", _simulated(variant), False) for variant in ENGINE_VARIANTS]
    return out


INPUTS = _inputs()


def _rescrape(text: str, seed: int) -> str:
    """The next scrape: every value replaced by another finite number."""
    rng = random.Random(seed)
    return _VALUE.sub(lambda m: m.group(1) + str(rng.randrange(0, 10**6)), text)


def _normalised(text: str, openmetrics: bool, cache: ParseCache | None, keep: tuple[str, ...]) -> dict:
    families = parse(text, openmetrics, cache)
    fmt = norm.detect(families)
    assert fmt is not None
    families = norm.canonical_names(families, fmt)
    return norm.normalise(families, fmt, "ep", norm.engine_label(fmt, families), keep).series


def _unmemoised(monkeypatch) -> None:
    """The reference: every sample's labels split afresh (no Context memo)."""
    monkeypatch.setattr(Context, "split", lambda self, labels: self._split(labels))
    monkeypatch.setattr(Context, "split_items", lambda self, ident: self._split(dict(ident)))


@pytest.mark.parametrize(("name", "text", "openmetrics"), INPUTS, ids=[i[0] for i in INPUTS])
@pytest.mark.parametrize("keep", [(), ("dp_rank", "tp_rank")])
def test_steady_state_mapping_equals_a_cold_one(name, text, openmetrics, keep):
    cache = ParseCache()
    scrapes = [text] + [_rescrape(text, seed) for seed in range(1, 4)]
    warm = [_normalised(scrape, openmetrics, cache, keep) for scrape in scrapes]
    with pytest.MonkeyPatch.context() as mp:
        _unmemoised(mp)
        cold = [_normalised(scrape, openmetrics, None, keep) for scrape in scrapes]
    for w, c in zip(warm, cold):
        assert w == c
        assert any(w.values()), f"{name}: the mapping yields nothing"


def test_steady_state_histograms_per_rank_carry_their_own_counts():
    text = _simulated("vllm")  # 3 data-parallel ranks (vLLM's `engine` label)
    cache = ParseCache()
    for seed in range(3):
        scrape = text if seed == 0 else _rescrape(text, seed)
        counts = {m.group(1): float(m.group(2)) for m in re.finditer(
            r'^vllm:time_to_first_token_seconds_count\{[^}]*engine="(\d)"[^}]*\} (\S+)$', scrape, re.M)}
        infs = {m.group(1): float(m.group(2)) for m in re.finditer(
            r'^vllm:time_to_first_token_seconds_bucket\{[^}]*engine="(\d)",le="\+Inf"\} (\S+)$', scrape,
            re.M)}
        series = _normalised(scrape, False, cache, ("dp_rank",))["infrapulse_llm_time_to_first_token_seconds"]
        assert len(counts) == 3 and len(series) == 3
        for labels, hist in series.items():
            rank = next(v for v in labels[3:] if v)  # the kept dp_rank value
            assert hist.count == counts[rank]
            assert hist.buckets[-1] == (math.inf, infs[rank])


def test_memos_stay_bounded_without_shared_label_dicts():
    text = _simulated("vllm")
    samples = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    ctx = norm.context_for("vllm", (), "")
    for _ in range(10):  # cold parses: new label dicts every time
        _normalised(text, False, None, ())
    assert len(ctx._memo) <= 2 * samples + MEMO_SLACK
    cache = ParseCache()
    for _ in range(3):
        _normalised(text, False, cache, ())
    held = len(ctx._memo)
    _normalised(_rescrape(text, 9), False, cache, ())
    assert len(ctx._memo) == held  # shared dicts: nothing new to remember in steady state
