"""Health semantics a person on call expects.

* A latency SLO breach is never healthy: the status is at best degraded while TTFT/ITL p95 is
  past its objective; at or past the bad level the serving component is capped like a critical
  signal caps it, but the overall cap stays reserved for hardware and fabric faults.
* One detractor per target, naming every signal that scores it.
* Scores are rounded once: the metric reads 100, not 99.99999999999999.

One set of bands everywhere (the status word the same in /api/v1/health, `infrapulse score`'s exit
code, the status page and the `infrapulse_health_status{status}` state set the alerts read) is
checked against a daemon in tests/integration/test_health_status_served.py.
"""

from __future__ import annotations

import pytest

from health_fixtures import (
    GPU_LABELS,
    HOST,
    Feed,
    empty_histogram,
    health_config,
    latency_histogram,
    service_for,
    signal,
)
from infrapulse.health import scoring
from infrapulse.health.scoring import evaluate
from infrapulse.health.signals import Measurement

EP = ("llama", "vllm", "llama-3-70b")
SWQ = ("leaf03", "Ethernet12", "3")


def _serving(feed: Feed, ttft_p95: float) -> Feed:
    """One vLLM endpoint: TTFT p95 as given, the five other serving signals healthy."""
    feed.gauge("serving", "infrapulse_llm_endpoint_up", EP[:2], 1, "llama")
    feed.series("serving", "infrapulse_llm_time_to_first_token_seconds", EP,
                [empty_histogram(ttft_p95), latency_histogram(ttft_p95)], "llama")
    feed.series("serving", "infrapulse_llm_inter_token_latency_seconds", EP,
                [empty_histogram(0.02), latency_histogram(0.02)], "llama")
    feed.gauge("serving", "infrapulse_llm_requests_waiting", EP, 0, "llama")
    feed.gauge("serving", "infrapulse_llm_requests_running", EP, 8, "llama")
    feed.gauge("serving", "infrapulse_llm_kv_cache_usage_ratio", EP, 0.4, "llama")
    feed.counter("serving", "infrapulse_llm_requests_total", EP + ("success",), 0, 1000, "llama")
    feed.counter("serving", "infrapulse_llm_preemptions_total", EP, 0, 0, "llama")
    return feed


def _fabric_and_gpu(feed: Feed, flaps: float = 0) -> Feed:
    feed.counter("gnmi", "infrapulse_switch_queue_transmitted_packets_total", SWQ, 0, 10_000, "leaf03")
    feed.counter("gnmi", "infrapulse_switch_queue_ecn_marked_packets_total", SWQ, 0, 5, "leaf03")
    feed.counter("gnmi", "infrapulse_switch_interface_carrier_transitions_total", SWQ[:2], 0, 2 * flaps,
                 "leaf03")
    feed.gauge("gnmi", "infrapulse_switch_up", ("leaf03",), 1, "leaf03")
    # not target "nvml": a daemon's own nvml source (no NVML here) removes that instance when it gives up
    feed.gauge("nvml", "infrapulse_gpu_healthy", GPU_LABELS, 1, "gpu-fixture")
    return feed


def test_a_ttft_breach_diluted_by_healthy_signals_is_still_degraded():
    """The issue's case: TTFT p95 2.42 s against a 1.5 s SLO, five healthy serving signals."""
    feed = _serving(Feed(), 2.42)
    service = service_for(feed.store)
    feed.publish(service)
    report = service.report
    ttft = signal(report, "ttft_p95")
    assert ttft.score == round(100 * (3.0 - 2.42) / 1.5, 2)  # 38.67 on the 1.5 s .. 3 s curve
    # (5 * 38.67 + 15 * 100) / 20: the score alone would read healthy
    assert report.score == pytest.approx(84.67, abs=0.01) and report.score >= 80
    assert report.status == "degraded"
    assert [(b.signal, b.target, b.objective, b.past_bad) for b in report.slo_breaches] == [
        ("ttft_p95", "endpoint llama", 1.5, False)]
    assert report.components["serving"].capped_by is None  # below the bad level: no cap
    assert report.component_status["serving"] == "degraded"


def test_a_ttft_past_its_bad_level_caps_serving_but_not_the_overall_score():
    feed = _fabric_and_gpu(_serving(Feed(), 3.6))
    service = service_for(feed.store)
    feed.publish(service)
    report = service.report
    serving = report.components["serving"]
    assert serving.score == 0.0 and serving.capped_by == "ttft_p95"
    assert serving.mean == 75.0  # (5 * 0 + 15 * 100) / 20 before the cap
    # The overall cap (40) is for hardware and fabric faults: a load-driven breach does not fire it.
    assert report.firing == [] and report.cap is None and report.capped_by == []
    # network 100 (0.3), gpu 100 (0.25), serving 0 (0.3): 55 / 0.85
    assert report.score == round(55 / 0.85, 2) and report.status == "degraded"
    assert report.slo_breaches[0].past_bad is True


def test_an_itl_breach_counts_like_a_ttft_breach():
    feed = _serving(Feed(), 0.3)  # TTFT fine; ITL p95 20 ms
    service = service_for(feed.store, "  slo: {itl_p95_seconds: 0.015}\n")
    feed.publish(service)
    report = service.report
    assert [b.signal for b in report.slo_breaches] == ["itl_p95"]  # ITL 20 ms against 15 ms
    assert report.status == "degraded" and report.score >= 80


def test_a_zero_weight_slo_signal_does_not_hold_the_status():
    feed = _serving(Feed(), 2.42)
    service = service_for(feed.store, "  signal_weights: {ttft_p95: 0}\n")
    feed.publish(service)
    assert service.report.slo_breaches == [] and service.report.status == "healthy"


def test_a_switch_port_scored_by_two_signals_is_one_detractor_naming_both():
    """pfc_pause_ratio and its topology view uplink_pfc_pause_ratio measure the same switch port."""
    feed = Feed()
    swp = ("leaf03", "Ethernet12", "3", "rx")
    feed.counter("gnmi", "infrapulse_switch_pfc_pause_duration_seconds_total", swp, 0, 18, "leaf03")  # 30%
    feed.gauge("gnmi", "infrapulse_switch_lldp_neighbor_info", ("leaf03", "Ethernet12", HOST, "eth0"), 1,
               "leaf03")
    feed.counter("gnmi", "infrapulse_switch_queue_transmitted_packets_total", SWQ, 0, 10_000, "leaf03")
    feed.counter("gnmi", "infrapulse_switch_queue_ecn_marked_packets_total", SWQ, 0, 150, "leaf03")  # 1.5%
    feed.gauge("infiniband", "infrapulse_rdma_port_state", ("mlx5_0", "1"), 4, "mlx5_0")  # a node too
    service = service_for(feed.store)
    feed.publish(service)
    report = service.report
    targets = [d.target.measurement.target for d in report.detractors]
    assert len(targets) == len(set(targets)), targets  # one entry per target
    port = next(d for d in report.detractors
                if d.target.measurement.target == "leaf03 Ethernet12 priority 3 rx")
    assert port.signals == ["pfc_pause_ratio", "uplink_pfc_pause_ratio"]
    assert port.rank == 1  # critical and firing
    assert port.sentence == ("leaf03 Ethernet12 priority 3 rx: pause in effect 30.0% of the time over the "
                             "last 1m (PFC: the peer paused this port; bad at 20%); also scored by "
                             "uplink_pfc_pause_ratio (topology)")
    queue = next(d for d in report.detractors if d.target.measurement.target == "leaf03 Ethernet12 queue 3")
    assert queue.signals == ["ecn_marked_ratio", "uplink_ecn_marked_ratio"]
    body = service.as_json()
    first = body["detractors"][0]
    assert first["signal"] == "pfc_pause_ratio"
    assert first["signals"] == ["pfc_pause_ratio", "uplink_pfc_pause_ratio"]


def test_the_impact_of_a_merged_detractor_is_what_all_its_signals_cost():
    cfg = health_config()
    port = "leaf03 Ethernet12 priority 3 rx"
    labels = {"switch": "leaf03", "interface": "Ethernet12", "priority": "3", "direction": "rx"}
    measured = {"pfc_pause_ratio": [Measurement(port, 0.1, labels=labels)],
                "uplink_pfc_pause_ratio": [Measurement(port, 0.1, labels=labels)],
                "ecn_marked_ratio": [Measurement("leaf03 Ethernet12 queue 3", 0.0)]}
    report = evaluate(measured, cfg)
    (merged,) = report.detractors
    # pfc 0.1 on the 0.5%..20% curve: 51.28; network: pfc weight 3 of 6 -> share 0.3/0.4 * 3/6;
    # topology: the one uplink signal -> share 0.1/0.4
    sub = round(100 * (0.2 - 0.1) / 0.195, 2)
    expected = (0.3 / 0.4) * (3 / 6) * (100 - sub) + (0.1 / 0.4) * (100 - sub)
    assert merged.impact == pytest.approx(expected)
    assert merged.signals == ["pfc_pause_ratio", "uplink_pfc_pause_ratio"]


def test_the_score_is_rounded_once():
    """Five healthy components with the default weights (sum 1.1) average to 99.99999999999999
    in floating point; the metric, the API and the status all read 100."""
    measured = {"ecn_marked_ratio": [Measurement("q", 0.0)], "port_not_active": [Measurement("p", 0.0)],
                "gpu_lost": [Measurement("GPU 0", 0.0)], "kv_cache_usage": [Measurement("e", 0.1)],
                "uplink_ecn_marked_ratio": [Measurement("q", 0.0)]}
    report = evaluate(measured, health_config())
    assert scoring._weighted([(w, 100.0) for w in (0.3, 0.15, 0.25, 0.3, 0.1)]) != 100.0  # the float trap
    assert report.raw_score == 100.0 and report.score == 100.0 and report.status == "healthy"
