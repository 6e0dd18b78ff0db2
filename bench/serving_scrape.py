"""Parse + normalise a vLLM exposition (2,120 lines, and a 20k-line one), beside prometheus_client.

The peer is the library floor: `prometheus_client.parser.text_string_to_metric_families`
only parses (no mapping). infrapulse does more work per scrape (parse, detect, map into
infrapulse_llm_* with rank aggregation, feed the quantile window) and should still cost less.

Two expositions: the simulator's vLLM grown with data-parallel ranks to ~`--lines` (2,120
lines at the default 2,000), and one of ~`--big-lines` (default 20,000) where one vLLM serves
many models (base models and LoRA adapters, each with its own `model_name`), families merged
as one server prints them. For a before figure run this file against another checkout's package
(`PYTHONPATH=<checkout>/exporter`); versions without `textparse.ParseCache` get the plain label
cache they had.

    .venv/bin/python bench/serving_scrape.py [--lines 2000] [--big-lines 20000] [--repeat 30]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from infrapulse import textparse
from infrapulse.health.latency import QuantileTracker
from infrapulse.simulate.serving_engines import EngineServer, LoadModel, render_vllm
from infrapulse.sources.serving import normalize as norm
from infrapulse.textparse import parse


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
    """Median CPU seconds per call of each function (process time: other processes on a shared
    machine do not count), measured round-robin so that cache and frequency effects hit every
    contender alike."""
    for fn in fns:
        fn()  # warm-up (fills the parse caches: the steady state)
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            started = time.process_time()
            fn()
            samples[i].append(time.process_time() - started)
    return [statistics.median(s) for s in samples]


def many_models_exposition(target_lines: int) -> str:
    """One vLLM serving many models (LoRA adapters each get their own model_name), ~target_lines:
    each family's HELP/TYPE once, then every model's samples, as a single server prints them."""
    headers: dict[str, list[str]] = {}
    samples: dict[str, list[str]] = {}
    index = 0
    while sum(len(v) for v in samples.values()) + sum(len(v) for v in headers.values()) < target_lines:
        model = f"meta-llama/Llama-3.1-8B-Instruct-lora-{index:03d}"
        rank = LoadModel(arrival_rate=2.0, seed=index)
        rank.advance(60.0)
        family = ""
        for line in render_vllm([rank], model).splitlines():
            if line.startswith("# HELP "):
                family = line.split()[2]
            if line.startswith("#"):
                if index == 0:
                    headers.setdefault(family, []).append(line)
            elif index == 0 or not line.startswith("process_start_time_seconds"):  # one process
                samples.setdefault(family, []).append(line)
        index += 1
    return "".join("\n".join(headers[f] + samples[f]) + "\n" for f in headers)


def new_cache() -> object:
    """What the Scraper keeps per URL: a ParseCache, or a label dict in versions before it."""
    return textparse.ParseCache() if hasattr(textparse, "ParseCache") else {}


def scrape_fn(parse_fn: Callable, text: str, cache: object) -> Callable[[], None]:
    """parse + detect + normalise + quantile window, as the serving source does per scrape."""
    tracker = QuantileTracker(300)
    tick = [0.0]

    def scrape() -> None:
        families = parse_fn(text, label_cache=cache)
        fmt = norm.detect(families)
        assert fmt is not None
        snapshot = norm.normalise(norm.canonical_names(families, fmt), fmt, "bench", "vllm")
        tick[0] += 5
        snapshot.timestamp = tick[0]
        tracker.observe("bench", "vllm", snapshot)

    return scrape


def bench_one(title: str, text: str, repeat: int) -> None:
    lines = text.count("\n")
    contenders: list[tuple[str, Callable[[], object]]] = [
        ("infrapulse parse + normalise, steady state", scrape_fn(parse, text, new_cache())),
        ("infrapulse parse only, cold (first scrape) ", lambda: parse(text)),
    ]

    def prometheus_client_parse() -> None:
        for family in text_string_to_metric_families(text):
            family.samples  # noqa: B018 - consume like a caller would

    contenders.append(("prometheus_client.parser (parse only)      ", prometheus_client_parse))
    times = timed([fn for _, fn in contenders], repeat)
    peer = times[-1]
    print(f"{title}: {lines} lines, {len(text)} bytes")
    for (label, _), seconds in zip(contenders, times):
        ratio = f"{peer / seconds:6.2f}x" if seconds else "failed"
        print(f"  {label}: {seconds * 1e3:8.2f} ms/scrape   peer/this {ratio}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--big-lines", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    bench_one("vLLM exposition (data-parallel ranks)", vllm_exposition(args.lines), args.repeat)
    if args.big_lines:
        bench_one("vLLM exposition (many models / LoRA adapters)", many_models_exposition(args.big_lines),
                  max(3, args.repeat // 5))


if __name__ == "__main__":
    main()
