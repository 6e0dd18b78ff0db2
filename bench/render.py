#!/usr/bin/env python3
"""/metrics render cost at fabric scale: the exposition encoder vs prometheus_client.

A store holds `--switches` switches x 64 ports of the nvidia-cumulus dialect (interface,
switch-priority PFC and queue leaves), taken in through the gnmi source's own SwitchState from
the serialized SAMPLE notifications bench/gnmi_ingest.py streams (no gRPC: this bench is about
the render). 64 switches give ~328k series. Measured, in this one process:

* encoder: what the daemon's /metrics renders (exposition.render_body over make_registry's
  registry), text 0.0.4 and OpenMetrics, warm (prefixes kept from an earlier render) and the
  first gzip scrape (every prefix built); gzip at level 1 of the text body, reported separately;
* prometheus_client over the same registry (`generate_latest(registry)`: the StoreCollector
  path every render took before the encoder) and prometheus_client's own registry (labelled
  Counter/Gauge children holding the same series, as a plain prometheus_client exporter would);
* RSS of the process with the store alone; serving gzip scrapes (what /metrics does for
  Prometheus: the kept prefixes, the text never held whole); after whole-body renders; after
  prometheus_client's renders too.

CPU is time.process_time() of each render (the best of --repeat); the values change between
renders (a fresh sample is applied to every switch before each one) so nothing is reused but
the prefixes. Run: PYTHONPATH=exporter python bench/render.py [--switches 45] [--repeat 3]
[--exporter DIR]: DIR is another tree's exporter/ (a tree from before the encoder: only the
prometheus_client figures and RSS are printed).
"""

from __future__ import annotations

import argparse
import gc
import gzip
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "exporter"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gnmi_ingest  # noqa: E402, I001  (it puts this tree's exporter/ first on sys.path)
from gnmi_ingest import PROFILE, prometheus_client_render, rss_mb, sample_messages  # noqa: E402

if "--exporter" in sys.argv:  # before importing infrapulse: measure another tree's code
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--exporter") + 1]).resolve()))

from prometheus_client import generate_latest  # noqa: E402
from prometheus_client.exposition import choose_encoder  # noqa: E402

from infrapulse.metrics import DaemonState, make_registry  # noqa: E402
from infrapulse.store import Store  # noqa: E402

OPENMETRICS = "application/openmetrics-text; version=1.0.0"


def fabric_store(switches: int) -> tuple[Store, Callable[[], None]]:
    """A store with `switches` switches' series and a function applying one more sample to all."""
    from infrapulse.simulate import gnmi_target
    from infrapulse.sources.gnmi import wire as gnmi_wire
    from infrapulse.sources.gnmi.ingest import SwitchState
    from infrapulse.sources.gnmi.profile import load_profiles

    # gnmi_ingest.sample_messages still imports the simulator's old name for scalar_value.
    if not hasattr(gnmi_target, "_typed"):
        gnmi_target._typed = gnmi_target.scalar_value  # type: ignore[attr-defined]
    profile = load_profiles()[PROFILE]
    messages = sample_messages()
    parse = gnmi_wire.SubscribeResponse.FromString
    store = Store()
    states = [SwitchState(f"leaf{i:02d}", profile) for i in range(switches)]

    def sample() -> None:
        for state in states:
            for m in messages:
                state.apply_wire(parse(m).update, m)

    sample()
    for state in states:
        store.publish("gnmi", state.name, state.snapshot, 1e9)
        store.record_success("gnmi", state.name, 0.0)
    return store, sample


def cpu_of(fn: Callable[[], object]) -> tuple[float, object]:
    gc.collect()
    c = time.process_time()
    out = fn()
    return time.process_time() - c, out


# prometheus_client's own registry is timed by gnmi_ingest's helper: in CPU here, like the rest.
gnmi_ingest._timed = lambda fn: cpu_of(fn)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--switches", type=int, default=45, help="45 switches: ~332k series")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--exporter", help="another tree's exporter/ directory to measure")
    args = parser.parse_args()
    try:
        from infrapulse.exposition import gzip_chunks, render_body, render_chunks
    except ImportError:
        return before_the_encoder(args)

    rss0 = rss_mb()
    store, sample = fabric_store(args.switches)
    registry = make_registry(store, DaemonState("bench", "fabric"))
    gc.collect()
    rss_store = rss_mb()
    print(f"store: {store.series_count():,} series from {args.switches} switches; "
          f"RSS {rss_store:.0f} MB (process before the store {rss0:.0f} MB)")

    text_enc, _ = choose_encoder("")
    om_enc, _ = choose_encoder(OPENMETRICS)
    # Prometheus scrapes with gzip: the daemon compresses the render as it is produced and never
    # holds the 35 MB text whole (http.RenderCache). The first scrape builds every prefix.
    first, _ = cpu_of(lambda: gzip_chunks(render_chunks(registry, text_enc)))
    sample()
    store.generation += 1
    gzip_chunks(render_chunks(registry, text_enc))
    gc.collect()
    rss_scraped = rss_mb()  # the store and the kept prefixes, as a daemon serving Prometheus holds them
    runs: dict[str, list[float]] = {"text": [], "openmetrics": [], "gzip": [], "reference": [], "scrape": []}
    for _ in range(args.repeat):
        sample()
        store.generation += 1
        t, body = cpu_of(lambda: render_body(registry, text_enc))
        runs["text"].append(t)
        runs["gzip"].append(cpu_of(lambda b=body: gzip.compress(b, compresslevel=1))[0])
        runs["openmetrics"].append(cpu_of(lambda: render_body(registry, om_enc))[0])
        # what a Prometheus scrape costs the daemon: the render streamed into gzip
        runs["scrape"].append(cpu_of(lambda: gzip_chunks(render_chunks(registry, text_enc)))[0])
    gz = gzip.compress(body, compresslevel=1)
    body_bytes = len(body)
    del body
    gc.collect()
    rss_bodies = rss_mb()  # after whole-body renders: what the allocator keeps of them
    for _ in range(args.repeat):
        sample()
        store.generation += 1
        body = render_body(registry, text_enc)
        t, reference = cpu_of(lambda: generate_latest(registry))
        runs["reference"].append(t)
        same = [ln for ln in reference.split(b"\n") if not ln.startswith(b"process_")] == \
            [ln for ln in body.split(b"\n") if not ln.startswith(b"process_")]
        if not same:
            raise SystemExit("the encoder's body differs from prometheus_client's")
        del body, reference
    best = {k: min(v) for k, v in runs.items()}
    plain_seconds, plain_bytes = prometheus_client_render(store)
    print(f"encoder, text 0.0.4:   {best['text']:.3f} s CPU ({body_bytes / 1e6:.1f} MB); "
          f"first gzip scrape (building every prefix) {first:.3f} s")
    print(f"encoder, OpenMetrics:  {best['openmetrics']:.3f} s CPU")
    print(f"gzip level 1 of it:    {best['gzip']:.3f} s CPU (-> {len(gz) / 1e6:.1f} MB), "
          f"text + gzip {best['text'] + best['gzip']:.3f} s")
    print(f"a gzip scrape (render streamed into gzip, as /metrics does): {best['scrape']:.3f} s CPU")
    print(f"prometheus_client over the same registry (the pre-encoder path): {best['reference']:.3f} s "
          f"-> encoder is {best['reference'] / best['text']:.1f}x faster; bodies identical")
    print(f"prometheus_client's own registry (labelled children): {plain_seconds:.3f} s CPU "
          f"({plain_bytes / 1e6:.1f} MB) -> encoder is {plain_seconds / best['text']:.1f}x faster")
    print(f"RSS: store {rss_store:.0f} MB; serving gzip scrapes (+ kept prefixes) {rss_scraped:.0f} MB "
          f"(+{rss_scraped - rss_store:.0f} MB for {store.series_count():,} series); "
          f"after whole-body renders {rss_bodies:.0f} MB (what the allocator keeps of the "
          f"{body_bytes / 1e6:.0f} MB bodies), after prometheus_client's renders too {rss_mb():.0f} MB")
    kept = [c for r in registry._encoders.values() for c in r.caches._caches.values()]
    blocks = sum(len(c.prefixes) for c in kept)
    size = sum(sys.getsizeof(c.prefixes) + sum(map(sys.getsizeof, c.prefixes.values()))
               # what each family's last lookup found, and the copy of its keys where one is kept
               # (a gNMI column is recognised by its keys_version; older trees kept a copy)
               + sum(sys.getsizeof(last[-1]) + (sys.getsizeof(last[0]) if isinstance(last[0], list) else 0)
                     for last in c.last.values()) for c in kept)
    # runs of small families (exposition/runs.py; trees before them have none) keep whole prefixes
    runs = [run for r in registry._encoders.values() for rs in getattr(r, "_runs", {}).values() for run in rs]
    run_prefixes = sum(len(run.prefixes) for run in runs)
    size += sum(sys.getsizeof(run.prefixes) + sum(map(sys.getsizeof, run.prefixes)) for run in runs)
    print(f"kept prefixes: {blocks:,} label blocks and {run_prefixes:,} prefixes of small families "
          f"for {store.series_count():,} series, {size / 1e6:.1f} MB with their per-family lookups")


def before_the_encoder(args: argparse.Namespace) -> None:
    rss0 = rss_mb()
    store, sample = fabric_store(args.switches)
    registry = make_registry(store, DaemonState("bench", "fabric"))
    gc.collect()
    rss_store = rss_mb()
    print(f"store: {store.series_count():,} series from {args.switches} switches; "
          f"RSS {rss_store:.0f} MB (process before the store {rss0:.0f} MB); no exposition encoder here")
    runs: dict[str, list[float]] = {"text": [], "gzip": []}
    for _ in range(args.repeat):
        sample()
        t, body = cpu_of(lambda: generate_latest(registry))
        runs["text"].append(t)
        runs["gzip"].append(cpu_of(lambda b=body: gzip.compress(b, compresslevel=1))[0])
    gc.collect()
    plain_seconds, plain_bytes = prometheus_client_render(store)
    print(f"/metrics render (prometheus_client over the registry), text: {min(runs['text']):.3f} s CPU "
          f"({len(body) / 1e6:.1f} MB); gzip level 1 {min(runs['gzip']):.3f} s")
    print(f"prometheus_client's own registry (labelled children): {plain_seconds:.3f} s CPU "
          f"-> /metrics render is {plain_seconds / min(runs['text']):.2f}x of it")
    print(f"RSS after renders: {rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
