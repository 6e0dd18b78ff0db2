"""dcgm mapping in steady state: label dicts shared across scrapes (ParseCache) and the mapper's
per-series memo give exactly what a fresh mapper gives on a cold parse, scrape after scrape."""

from __future__ import annotations

import random
import re

import pytest

from helpers import real
from infrapulse.simulate.dcgm_exporter import GpuExposition
from infrapulse.simulate.nvml_fake import FakeNvml
from infrapulse.sources.gpu.dcgm import MEMO_SLACK, DcgmMapper, _Series
from infrapulse.textparse import ParseCache, parse

CAPTURES = sorted(p.name for p in real("serving").glob("dcgm-*.prom"))
_VALUE = re.compile(r"^([^#\s][^\n]*?[ \t])([^ \t\n#]+)$", re.M)


def _inputs() -> list[tuple[str, str]]:
    out = [(f"real:{name}", real("serving", name).read_text()) for name in CAPTURES]
    fake = FakeNvml.from_file()
    out.append(("sim:dcgm-exporter", GpuExposition(fake).render()))
    out.append(("sim:dcgm-exporter-pods", GpuExposition(fake, pods={0: ("p", "ns", "c")}).render()))
    return out


INPUTS = _inputs()


def _rescrape(text: str, seed: int) -> str:
    rng = random.Random(seed)
    return _VALUE.sub(lambda m: m.group(1) + str(rng.randrange(0, 1000)), text)


def _mapped(mapper: DcgmMapper, text: str, cache: ParseCache | None) -> tuple:
    snap = mapper.map(parse(text, label_cache=cache))
    return snap.series, mapper.coverage, mapper.unmapped, mapper.blanks


@pytest.mark.parametrize(("name", "text"), INPUTS, ids=[i[0] for i in INPUTS])
def test_steady_state_equals_an_unmemoised_mapper_on_a_cold_parse(name, text):
    mapper, cache = DcgmMapper("host"), ParseCache()
    scrapes = [text] + [_rescrape(text, seed) for seed in range(1, 4)]
    warm = [_mapped(mapper, scrape, cache) for scrape in scrapes]
    with pytest.MonkeyPatch.context() as mp:  # the reference: labels worked out for every sample
        mp.setattr(DcgmMapper, "_series", lambda self, labels: _Series(labels))
        cold = [_mapped(DcgmMapper("host"), scrape, None) for scrape in scrapes]
    for w, c in zip(warm, cold):
        assert w == c
        assert any(w[0].values()), f"{name}: nothing mapped"


def test_steady_state_keeps_every_gpu_apart():
    fake = FakeNvml.from_file()
    text = GpuExposition(fake).render()
    mapper, cache = DcgmMapper("host"), ParseCache()
    for seed in range(3):
        series = mapper.map(parse(_rescrape(text, seed), label_cache=cache)).series
        gpus = {key[:2] for key in series["infrapulse_gpu_info"]}
        assert len(gpus) == len(fake.gpus) == 8


def test_memo_stays_bounded_without_shared_label_dicts():
    text = GpuExposition(FakeNvml.from_file()).render()
    samples = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    mapper = DcgmMapper("host")
    for _ in range(8):
        mapper.map(parse(text))  # cold parses: new label dicts every time
    assert len(mapper._memo) <= 2 * samples + MEMO_SLACK + samples
