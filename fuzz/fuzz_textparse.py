"""atheris harness: Prometheus exposition parsing, and the serving and DCGM mappings on top of it.

    python fuzz/fuzz_textparse.py -max_total_time=600 [CORPUS_DIR ...]

Any bytes are decoded as UTF-8 (bad sequences replaced, as scrape.py does with a declared charset)
and parsed both as text format and as OpenMetrics. Contract: families or `ParseError`; whatever
parse() accepts, every engine mapping and the DCGM mapper take without raising. Anything else
escaping is a crash (atheris stops and writes the input to crash-<sha1>).
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["infrapulse"]):
    from infrapulse.sources.gpu.dcgm import DcgmMapper
    from infrapulse.sources.serving import normalize as norm
    from infrapulse.textparse import ParseError, parse


def test_one_input(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    for openmetrics in (False, True):
        try:
            families = parse(text, openmetrics=openmetrics)
        except ParseError:
            continue
        # Same result with a label cache (the scraper keeps one per target).
        cached = parse(text, openmetrics=openmetrics, label_cache={})
        assert ([s for f in cached.values() for s in f.samples]
                == [s for f in families.values() for s in f.samples])
        fmt = norm.detect(families)
        for candidate in {fmt, *norm.FORMATS} - {None}:
            renamed = norm.canonical_names(families, candidate)
            norm.normalise(renamed, candidate, "ep", norm.engine_label(candidate, renamed),
                           ("dp_rank", "tp_rank"))
        DcgmMapper(hostname="fuzz").map(families)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
