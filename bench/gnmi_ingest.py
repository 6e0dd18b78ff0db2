"""gNMI ingest benchmark: infrapulse's gnmi source vs raw protobuf decode vs pygnmi.

A target process streams PROTO SAMPLE notifications for 64 switches x 64 ports x 8
priorities/queues (the nvidia-cumulus dialect as the simulator sends it: a notification per list
entry, as in the Cumulus 5.16 capture) over loopback, as fast as gRPC flow control lets it. Measured, in
one run:

  (a) raw decode: SubscribeResponse.FromString over the same bytes, touching every value
      (the ceiling for any Python client);
  (b) infrapulse: the real GnmiSource (64 Subscribe streams, one per switch, on one event loop)
      taking updates into the store; updates/s over wall time and per CPU-second;
  (c) pygnmi 0.8.15: gNMIclient.subscribe2 + its telemetryParser (what a Python user writes
      today), same stream;
  (d) the transport floor: grpc.aio receiving the same streams as bytes and dropping them;
  (e) SwitchState alone: the same bytes parsed and applied in process, 64 switches taking turns
      message by message (no gRPC);
  plus RSS with ~250k+ live series and the /metrics render time of those series beside
  prometheus_client's own registry (labelled Counter/Gauge children) rendering the same series.

Run: .venv/bin/python bench/gnmi_ingest.py [--seconds 8] [--switches 64]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing as mp
import os
import resource
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "exporter"))

from pygnmi.spec.v080 import gnmi_pb2 as pb  # noqa: E402  (the one gNMI stub set)

PORTS = 64
PROFILE = "nvidia-cumulus"


# -- the stream ---------------------------------------------------------------------------------


def sample_messages(ports: int = PORTS) -> list[bytes]:
    """One full sample of one switch as serialized SubscribeResponses, as the project's simulator
    sends it for the profile's SAMPLE subscriptions: a notification per list entry (prefix = the
    interface, priority or queue entry; its leaves as relative paths), the shape of the Cumulus
    5.16 capture. Packing several entries into one notification would flatter the transport."""
    from infrapulse.simulate.gnmi_target import Renderer, SimSwitch
    from infrapulse.sources.gnmi.profile import load_profiles
    from infrapulse.sources.gnmi.session import subscribe_request

    switch = SimSwitch("bench", PROFILE, ports=ports, frozen=True)
    out = []
    for stream in load_profiles()[PROFILE].streams:
        request = subscribe_request(stream, "proto", 10.0)
        for sub in request.subscribe.subscription:
            if sub.mode != pb.SAMPLE:
                continue  # oper-status and LLDP are ON_CHANGE: not part of the SAMPLE stream
            notes, _ = Renderer(switch, request.subscribe.prefix, sub, pb.PROTO).render()
            out += [pb.SubscribeResponse(update=n).SerializeToString() for n in notes]
    return out


def leaves_in(messages: list[bytes]) -> int:
    return sum(len(pb.SubscribeResponse.FromString(m).update.update) for m in messages)


def serve(port_queue, ports: int) -> None:
    """The target process: every Subscribe gets the full sample, sync, then samples back to back."""
    import grpc

    pin_to_core(last=True)

    messages = sample_messages(ports)
    sync = pb.SubscribeResponse(sync_response=True).SerializeToString()

    async def subscribe(request_iterator, context):
        await request_iterator.__anext__()
        for m in messages:
            yield m
        yield sync
        while True:
            for m in messages:
                yield m

    async def capabilities(request, context):
        return pb.CapabilityResponse(supported_encodings=[pb.PROTO, pb.JSON], gNMI_version="0.8.0")

    async def main() -> None:
        server = grpc.aio.server(options=[("grpc.max_concurrent_streams", 1000)])
        handlers = {
            "Subscribe": grpc.stream_stream_rpc_method_handler(
                subscribe, request_deserializer=pb.SubscribeRequest.FromString,
                response_serializer=lambda b: b),
            "Capabilities": grpc.unary_unary_rpc_method_handler(
                capabilities, request_deserializer=pb.CapabilityRequest.FromString,
                response_serializer=pb.CapabilityResponse.SerializeToString),
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("gnmi.gNMI", handlers),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        port_queue.put(port)
        await server.wait_for_termination()

    asyncio.run(main())


def pin_to_core(last: bool) -> str:
    """Keep the client on one core and the target on another, so that "updates/s" means on one
    core (gRPC's poller thread included) and the two never steal each other's CPU."""
    if not hasattr(os, "sched_setaffinity"):
        return "not pinned (no sched_setaffinity)"
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return "not pinned (one CPU available)"
    cpu = cpus[-1] if last else cpus[0]
    os.sched_setaffinity(0, {cpu})
    return f"pinned to CPU {cpu}"


# -- (a) raw decode -------------------------------------------------------------------------------


def raw_decode(messages: list[bytes], seconds: float) -> float:
    parse = pb.SubscribeResponse.FromString
    leaves = 0
    started = time.process_time()
    while time.process_time() - started < seconds:
        for m in messages:
            for u in parse(m).update.update:
                u.val.uint_val  # noqa: B018 - touch the value, as any consumer must
                leaves += 1
    return leaves / (time.process_time() - started)


# -- (b) infrapulse -------------------------------------------------------------------------------


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def run_infrapulse(port: int, switches: int, seconds: float) -> dict:
    from prometheus_client import generate_latest

    from infrapulse.metrics import DaemonState, make_registry
    from infrapulse.sources.base import SourceContext
    from infrapulse.sources.gnmi.config import CONFIG
    from infrapulse.sources.gnmi.source import GnmiSource
    from infrapulse.store import Store

    rss_before = rss_mb()
    config = CONFIG.validate({
        "defaults": {"insecure": True, "profile": PROFILE, "sample_interval": "10s", "stall_timeout": "600s"},
        "targets": [{"name": f"leaf{i:02d}", "address": f"127.0.0.1:{port}"} for i in range(switches)],
    }, "sources.gnmi")
    store = Store()
    source = GnmiSource(config, SourceContext(store=store, interval=5.0, hostname="bench"))
    task = asyncio.create_task(source.run())

    def total_updates() -> float:
        return sum(s.state.updates for s in source.sessions.values())

    deadline = time.monotonic() + 120
    while not (len(source.sessions) == switches and all(s.state.up for s in source.sessions.values())):
        if time.monotonic() > deadline:
            raise SystemExit("switches did not sync within 120s")
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    u0, w0, c0 = total_updates(), time.perf_counter(), time.process_time()
    threads_cpu0 = _thread_cpu()
    await asyncio.sleep(seconds)
    u1, w1, c1 = total_updates(), time.perf_counter(), time.process_time()
    threads_cpu1 = _thread_cpu()
    live_series, live_rss = store.series_count(), rss_mb()  # while all 64 streams are flowing
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await source.close()
    gc.collect()
    series = store.series_count()
    rss = rss_mb()
    registry = make_registry(store, DaemonState("bench", "fabric"))
    ours = min(_timed(lambda: generate_latest(registry)) for _ in range(3))
    body = generate_latest(registry)
    return {"updates_per_s_wall": (u1 - u0) / (w1 - w0), "cpu_s": c1 - c0, "wall_s": w1 - w0,
            "updates_per_cpu_s": (u1 - u0) / (c1 - c0), "main_thread_cpu_s": threads_cpu1 - threads_cpu0,
            "series": series, "rss_mb": rss, "rss_before_mb": rss_before, "render_s": ours,
            "live_series": live_series, "live_rss_mb": live_rss,
            "render_bytes": len(body), "store": store}


def _thread_cpu() -> float:
    return time.thread_time()


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def prometheus_client_render(store) -> tuple[float, int]:
    """The same series in prometheus_client's plain registry (labelled children), rendered."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

    from infrapulse import catalog

    registry = CollectorRegistry()
    by_family: dict[str, list] = {}
    for (_src, _tgt), snap in store.snapshots():
        for name, series in snap.series.items():
            by_family.setdefault(name, []).append(series)
    for name, parts in by_family.items():
        fam = catalog.get(name)
        if fam.type == catalog.COUNTER:
            metric = Counter(name[:-len("_total")], fam.help, fam.labels, registry=registry)
            for series in parts:
                for labels, v in series.items():
                    metric.labels(*labels).inc(v)
        else:
            metric = Gauge(name[:-len("_info")] if fam.type == catalog.INFO else name, fam.help, fam.labels,
                           registry=registry)
            for series in parts:
                for labels, v in series.items():
                    metric.labels(*labels).set(v)
    seconds = min(_timed(lambda: generate_latest(registry)) for _ in range(3))
    return seconds, len(generate_latest(registry))


def in_process_apply(messages: list[bytes], seconds: float, switches: int) -> float:
    """SwitchState alone, fed the same SubscribeResponse bytes the stream carries (bulk view
    parse + apply, as `SwitchSession._read` does), for `switches` states. The switches take
    turns message by message, as 64 concurrent streams do: one switch at a time would keep
    its series in the CPU cache and flatter the store's layout."""
    from infrapulse.sources.gnmi import wire as gnmi_wire
    from infrapulse.sources.gnmi.ingest import SwitchState
    from infrapulse.sources.gnmi.profile import load_profiles

    states = [SwitchState(f"micro{i}", load_profiles()[PROFILE]) for i in range(switches)]
    parse = gnmi_wire.SubscribeResponse.FromString
    per_round = leaves_in(messages) * switches
    interleaved = [(state.apply_wire, m) for m in messages for state in states]
    for apply, m in interleaved:
        apply(parse(m).update, m)
    leaves = 0
    started = time.process_time()
    while time.process_time() - started < seconds:
        for apply, m in interleaved:
            apply(parse(m).update, m)
        leaves += per_round
    return leaves / (time.process_time() - started)


async def transport_floor(port: int, switches: int, seconds: float, leaves_per_message: float) -> float:
    """grpc.aio alone: the same streams (a channel each, as the source opens them), every message
    received as bytes and dropped. No Python gRPC client can take updates faster than this."""
    import grpc

    from infrapulse.sources.gnmi.session import SUBSCRIBE_METHOD

    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.http2.bdp_probe", 0)])
                for _ in range(switches)]
    received = [0]

    async def drain(channel) -> None:
        call = channel.stream_stream(SUBSCRIBE_METHOD,
                                     request_serializer=pb.SubscribeRequest.SerializeToString,
                                     response_deserializer=None)()
        await call.write(pb.SubscribeRequest())
        async for _ in call:
            received[0] += 1

    tasks = [asyncio.create_task(drain(c)) for c in channels]
    await asyncio.sleep(2.0)
    m0, c0 = received[0], time.process_time()
    await asyncio.sleep(seconds)
    m1, c1 = received[0], time.process_time()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for channel in channels:
        await channel.close()
    return (m1 - m0) * leaves_per_message / (c1 - c0)


async def measure_clients(port: int, switches: int, seconds: float,
                          leaves_per_message: float) -> tuple[dict, float]:
    # One event loop for both: grpc.aio binds its completion-queue poller to the first loop.
    ours = await run_infrapulse(port, switches, seconds)
    return ours, await transport_floor(port, switches, min(seconds, 4.0), leaves_per_message)


# -- (c) pygnmi -----------------------------------------------------------------------------------


def run_pygnmi(port: int, seconds: float, streams: int = 1) -> tuple[float, float]:
    from pygnmi.client import gNMIclient

    counts = [0] * streams
    stop = threading.Event()
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            with gNMIclient(target=("127.0.0.1", port), insecure=True, username="u", password="p") as gc_:
                sub = gc_.subscribe2(subscribe={
                    "subscription": [{"path": "/interfaces/interface[name=*]/state/counters",
                                      "mode": "sample", "sample_interval": 1_000_000_000}],
                    "mode": "stream", "encoding": "proto"})
                while not stop.is_set():
                    msg = sub.get_update(timeout=5)
                    update = msg.get("update", {}) if isinstance(msg, dict) else {}
                    counts[i] += len(update.get("update", []))
                sub.close()
        except BaseException as exc:  # noqa: BLE001 - report, do not hang the benchmark
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(streams)]
    for t in threads:
        t.start()
    time.sleep(2.0)  # connect + initial merge-until-sync
    start_counts, t0, c0 = sum(counts), time.perf_counter(), time.process_time()
    time.sleep(seconds)
    done, t1, c1 = sum(counts), time.perf_counter(), time.process_time()
    # pygnmi's reader threads raise when their channel closes under them: expected here, not news.
    threading.excepthook = lambda args: None
    stop.set()
    for t in threads:
        t.join(timeout=10)
    if errors and done == start_counts:
        print(f"    pygnmi failed: {errors[0]!r}")
        return 0.0, 0.0
    return (done - start_counts) / (t1 - t0), (done - start_counts) / (c1 - c0)


def peer_figure(wall: float, per_cpu: float) -> str:
    """A peer's updates/s, or why there is none: 0 updates in the window is a failed measurement
    (a loaded machine starving pygnmi's threads, a stream that never started), not a speed."""
    if wall <= 0 or per_cpu <= 0:
        return "FAILED MEASUREMENT: 0 updates in the window (no figure, no ratio)"
    return f"{wall:>11,.0f} updates/s wall ({per_cpu:,.0f}/CPU-s)"


def peer_ratio(ours: dict, wall: float, per_cpu: float) -> str:
    """infrapulse over the peer, only when the peer was measured."""
    if wall <= 0 or per_cpu <= 0:
        return "no ratio (the pygnmi measurement failed: 0 updates)"
    return (f"{ours['updates_per_s_wall'] / wall:6.1f}x wall, "
            f"{ours['updates_per_cpu_s'] / per_cpu:.1f}x per CPU-s")


# -- main -----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--switches", type=int, default=64)
    args = parser.parse_args()

    messages = sample_messages()
    per_switch = leaves_in(messages)
    print(f"stream: {args.switches} switches x {PORTS} ports ({PROFILE}, PROTO SAMPLE): {len(messages)} "
          f"notifications / {per_switch} leaves per switch sample, "
          f"{sum(len(m) for m in messages) / per_switch:.1f} bytes/leaf")

    ctx = mp.get_context("spawn")
    port_queue = ctx.Queue()
    server = ctx.Process(target=serve, args=(port_queue, PORTS), daemon=True)
    server.start()
    try:
        port = port_queue.get(timeout=60)
        print(f"client (every measurement below) {pin_to_core(last=False)}; the target runs on another core")
        ceiling = raw_decode(messages, min(args.seconds, 4.0))
        print(f"(a) raw protobuf decode (ceiling):     {ceiling:>12,.0f} leaves/s per CPU-second")

        ours, floor = asyncio.run(measure_clients(port, args.switches, args.seconds,
                                                  per_switch / len(messages)))
        print(f"(b) infrapulse gnmi source into store: {ours['updates_per_s_wall']:>12,.0f} updates/s wall "
              f"({ours['updates_per_cpu_s']:,.0f}/CPU-s; process CPU {ours['cpu_s']:.2f}s over "
              f"{ours['wall_s']:.2f}s wall, event-loop thread {ours['main_thread_cpu_s']:.2f}s)")
        print(f"(d) grpc.aio transport alone, bytes dropped: {floor:>8,.0f} leaves/s per CPU-s "
              f"({ceiling / floor:.2f}x the raw decode's cost before any decoding)")
        pyg, pyg_cpu = run_pygnmi(port, args.seconds, streams=args.switches)
        print(f"(c) pygnmi subscribe2 + telemetryParser: {peer_figure(pyg, pyg_cpu)} "
              f"({args.switches} subscriptions = {args.switches} client threads)")
        pyg1, pyg1_cpu = run_pygnmi(port, args.seconds, streams=1)
        print(f"    pygnmi with a single subscription:   {peer_figure(pyg1, pyg1_cpu)}")
        micro = in_process_apply(messages, min(args.seconds, 4.0), args.switches)
        print(f"    infrapulse SwitchState alone (parse + apply, no gRPC, {args.switches} switches): "
              f"{micro:,.0f} leaves/s per CPU-s")
        store = ours.pop("store")
        peer_render, peer_bytes = prometheus_client_render(store)
        print()
        print(f"infrapulse / pygnmi:            {peer_ratio(ours, pyg, pyg_cpu)} on the same {args.switches} "
              f"streams; {peer_ratio(ours, pyg1, pyg1_cpu)} against pygnmi's best case (1 stream)   "
              "(target >= 5x)")
        print(f"raw decode / infrapulse:        {ceiling / ours['updates_per_cpu_s']:6.2f}x end to end "
              "(gRPC included), "
              f"{ceiling / micro:.2f}x decode+apply only   (target <= 3x, per CPU-s)")
        print(f"live series: {ours['live_series']:,}   RSS {ours['live_rss_mb']:.0f} MB while streaming, "
              f"{ours['rss_mb']:.0f} MB after closing the channels "
              f"(before connecting {ours['rss_before_mb']:.0f} MB)   (target <= 300 MB)")
        print(f"/metrics render of {ours['series']:,} series: infrapulse {ours['render_s'] * 1000:.0f} ms "
              f"({ours['render_bytes'] / 1e6:.1f} MB), "
              f"prometheus_client registry {peer_render * 1000:.0f} ms "
              f"({peer_bytes / 1e6:.1f} MB): ratio {ours['render_s'] / peer_render:.2f}x (target <= 1x)")
    finally:
        server.terminate()
        server.join(timeout=5)


if __name__ == "__main__":
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    main()
