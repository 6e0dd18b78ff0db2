"""The benches' own arithmetic: a peer that measured nothing is a failed measurement, never a
ratio (issue 20: pygnmi printed 0 updates/s on a loaded machine and a ratio was still drawn), and
the whole-process bench buckets py-spy stacks into the parts the issue asks about. The kmsg flood
bench, run in a tiny mode, is in tests/integration/test_bench_figures_kmsg.py."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import gnmi_ingest  # noqa: E402
import whole_process  # noqa: E402

OURS = {"updates_per_s_wall": 200_000.0, "updates_per_cpu_s": 400_000.0}


def test_a_peer_of_zero_is_a_failed_measurement_without_a_ratio():
    assert gnmi_ingest.peer_figure(0.0, 0.0).startswith("FAILED MEASUREMENT")
    assert gnmi_ingest.peer_ratio(OURS, 0.0, 0.0) == "no ratio (the pygnmi measurement failed: 0 updates)"
    # updates seen but no CPU accounted is as meaningless as none seen
    assert "no ratio" in gnmi_ingest.peer_ratio(OURS, 10.0, 0.0)


def test_a_measured_peer_gets_its_ratio():
    assert gnmi_ingest.peer_ratio(OURS, 20_000.0, 100_000.0) == "  10.0x wall, 4.0x per CPU-s"
    assert gnmi_ingest.peer_figure(20_000.0, 100_000.0).strip().startswith("20,000 updates/s wall")


def test_py_spy_stacks_are_bucketed_by_part():
    grpc_read = ("_run (asyncio/events.py:80);_read (infrapulse/sources/gnmi/session.py:290);"
                 "_fetch_stream_responses (grpc/aio/_call.py:370)")
    apply = ("_run (asyncio/events.py:80);_read (infrapulse/sources/gnmi/session.py:297);"
             "apply_wire (infrapulse/sources/gnmi/ingest.py:470)")
    health = ("_run (asyncio/events.py:80);run (infrapulse/health/service.py:170);"
              "update (infrapulse/store.py:9)")
    render = ("_run (asyncio/events.py:80);metrics_handler (infrapulse/http.py:90);"
              "generate_latest (prometheus_client/exposition.py:200)")
    idle = "run_forever (asyncio/base_events.py:608);EpollSelector.select (selectors.py:468)"
    assert whole_process.classify(grpc_read) == "transport (grpc)"
    assert whole_process.classify(apply) == "ingest"
    assert whole_process.classify(health) == "health"
    assert whole_process.classify(render) == "render"
    assert whole_process.classify(idle) == "waiting"
    loop_only = "run_forever (asyncio/base_events.py:608);_run_once (asyncio/base_events.py:1922)"
    assert whole_process.classify(loop_only) == "event loop"
    assert whole_process.classify("main (threading.py:1)") == "other"


def test_a_thread_running_native_code_is_the_grpc_poller():
    poller = ("Thread._bootstrap (threading.py:1002);Thread._bootstrap_inner (threading.py:1045);"
              "Thread.run (threading.py:982)")
    assert whole_process.classify(poller) == "transport (grpc)"
