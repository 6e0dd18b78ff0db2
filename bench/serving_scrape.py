"""Parse + normalise a 2,000-line vLLM exposition, beside prometheus_client's parser alone.

The peer is the library floor: `prometheus_client.parser.text_string_to_metric_families`
only parses (no mapping). infrapulse does more work per scrape (parse, detect, map into
infrapulse_llm_* with rank aggregation, feed the quantile window) and should still cost less.

    .venv/bin/python bench/serving_scrape.py [--lines 2000] [--repeat 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

from prometheus_client.parser import text_string_to_metric_families

from infrapulse.health.latency import QuantileTracker
from infrapulse.simulate.serving_engines import EngineServer
from infrapulse.sources.serving import normalize as norm
from infrapulse.textparse import ParseCache, parse


def vllm_exposition(target_lines: int) -> str:
    """A vLLM 0.33 exposition grown to ~target_lines with data-parallel engines (real names/buckets)."""
    clock = [0.0]
    ranks = 1
    while True:
        server = EngineServer("vllm", dp_ranks=ranks, clock=lambda: clock[0], arrival_rate=3.0 * ranks)
        clock[0] = 60.0
        server.advance()
        text = server.render()
        if text.count("\n") >= target_lines:
            return text
        ranks += 1


def timed(fns, repeat: int) -> list[float]:
    """Median seconds per call of each function, measured round-robin so that load from other
    processes on a shared machine hits every contender alike."""
    for fn in fns:
        fn()  # warm-up
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            started = time.perf_counter()
            fn()
            samples[i].append(time.perf_counter() - started)
    return [statistics.median(s) for s in samples]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    text = vllm_exposition(args.lines)
    lines = text.count("\n")
    tracker = QuantileTracker(300)
    tick = [0.0]

    cache = ParseCache()  # what Scraper keeps per URL between scrapes

    def infrapulse_scrape() -> None:
        families = parse(text, label_cache=cache)
        fmt = norm.detect(families)
        snapshot = norm.normalise(families, fmt, "bench", "vllm")
        tick[0] += 5
        snapshot.timestamp = tick[0]
        tracker.observe("bench", "vllm", snapshot)

    def infrapulse_parse_only() -> None:
        parse(text)  # no label cache: a first scrape

    def prometheus_client_parse() -> None:
        for family in text_string_to_metric_families(text):
            family.samples  # noqa: B018 - consume like a caller would

    ours, ours_parse, peer = timed([infrapulse_scrape, infrapulse_parse_only, prometheus_client_parse],
                                   args.repeat)
    print(f"vLLM exposition: {lines} lines, {len(text)} bytes")
    print(f"infrapulse parse + normalise + window : {ours * 1e3:8.2f} ms/scrape "
          "(steady state, label cache warm)")
    print(f"infrapulse parse only, cold cache     : {ours_parse * 1e3:8.2f} ms/scrape")
    print(f"prometheus_client.parser (parse only) : {peer * 1e3:8.2f} ms/scrape")
    print(f"ratio peer / infrapulse(full)         : {peer / ours:8.2f}x  (>1: infrapulse is faster)")


if __name__ == "__main__":
    main()
