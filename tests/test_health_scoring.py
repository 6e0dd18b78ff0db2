"""Scoring: the curve, caps, unknown handling and coverage, counter resets, reasons, smoothing,
and the `health:` config."""

from __future__ import annotations

import pytest

from health_fixtures import GPU_LABELS, Feed, health_config, service_for, signal
from infrapulse import config as config_mod
from infrapulse.health import scoring
from infrapulse.health.scoring import curve, evaluate
from infrapulse.health.signals import Measurement
from infrapulse.health.smoothing import Smoother

SWQ = ("leaf03", "Ethernet12", "3")


@pytest.mark.parametrize("value,good,bad,expected", [
    (0.0, 0.001, 0.05, 100.0), (0.001, 0.001, 0.05, 100.0), (0.0255, 0.001, 0.05, 50.0),
    (0.05, 0.001, 0.05, 0.0), (0.5, 0.001, 0.05, 0.0), (0.0377, 0.001, 0.05, 25.102040816),
    # higher is better (good > bad)
    (0.9, 0.8, 0.2, 100.0), (0.5, 0.8, 0.2, 50.0), (0.1, 0.8, 0.2, 0.0),
])
def test_curve(value, good, bad, expected):
    assert curve(value, good, bad) == pytest.approx(expected)


def _measured(**values) -> dict:
    """Signal name -> one measurement (value), every other signal not applicable."""
    return {name: [Measurement(f"t-{name}", v)] if v is not None else [] for name, v in values.items()}


def test_component_is_weighted_mean_of_known_signals():
    cfg = health_config()
    # ecn (weight 3) at 50, pfc ratio (weight 3) at 100, queue drops (weight 2) at 0
    report = evaluate(_measured(ecn_marked_ratio=0.0255, pfc_pause_ratio=0.0, queue_drop_ratio=1.0), cfg)
    net = report.components["network"]
    assert net.score == pytest.approx((3 * 50 + 3 * 100 + 2 * 0) / 8)
    assert net.capped_by is None
    # only one component known: the overall score is that component
    assert report.score == pytest.approx(net.score)
    assert report.status == "degraded"


def test_critical_signal_caps_component_and_overall():
    cfg = health_config()
    report = evaluate(_measured(ecn_marked_ratio=0.0, pfc_pause_ratio=0.0, link_flaps=3.0,
                                kv_cache_usage=0.5, ttft_p95=0.2), cfg)
    net = report.components["network"]
    assert net.mean == round((3 * 100 + 3 * 100 + 3 * 0) / 9, 2)  # scores are rounded once, to 2 digits
    assert net.score == 0.0 and net.capped_by == "link_flaps"
    # serving is perfect; network at 0 -> raw = 0.3*0 + 0.3*100 over 0.6 = 50 -> capped at 40
    assert report.raw_score == pytest.approx(50.0)
    assert report.score == 40.0
    assert report.capped_by == ["link_flaps"] and report.firing == ["link_flaps"]
    assert report.status == "critical"


def test_half_bad_critical_signal_caps_component_but_not_overall():
    cfg = health_config()
    report = evaluate(_measured(ecn_marked_ratio=0.0, link_flaps=1.5, kv_cache_usage=0.5), cfg)
    net = report.components["network"]
    assert net.score == pytest.approx(50.0) and net.capped_by == "link_flaps"
    assert report.firing == [] and report.capped_by == []
    assert report.score == pytest.approx((0.3 * 50 + 0.3 * 100) / 0.6)


def test_cap_only_lowers_the_score():
    cfg = health_config()
    report = evaluate(_measured(gpu_lost=1.0, xid_critical=3.0, ecn_marked_ratio=0.5), cfg)
    assert report.raw_score < 40
    assert report.score == pytest.approx(report.raw_score)
    assert report.firing == ["gpu_lost", "xid_critical"]
    assert report.capped_by == []


def test_configured_cap_and_critical_list():
    cfg = health_config("  critical_cap: 20\n  critical_signals: [kv_cache_usage]\n")
    report = evaluate(_measured(kv_cache_usage=0.99, link_flaps=5.0, ecn_marked_ratio=0.0, ttft_p95=0.1), cfg)
    net = report.components["network"]
    assert net.capped_by is None and net.score == pytest.approx(50.0)  # link_flaps is no longer critical
    assert report.components["serving"].score == 0.0
    assert report.raw_score == pytest.approx(25.0)
    assert report.score == 20.0 and report.capped_by == ["kv_cache_usage"]


def test_unknown_is_left_out_and_weights_renormalise():
    cfg = health_config()
    measured = _measured(ecn_marked_ratio=0.05, kv_cache_usage=0.5)
    measured["pfc_pause_ratio"] = []  # applicable but no data yet: unknown
    measured["ttft_p95"] = []
    report = evaluate(measured, cfg)
    net, serving = report.components["network"], report.components["serving"]
    assert net.score == 0.0 and serving.score == 100.0
    assert report.score == pytest.approx(50.0)  # equal component weights 0.3 / 0.3
    # coverage: network 3 of 6 weight known, serving 1 of 6 (kv 1, ttft 5)
    assert net.coverage == pytest.approx(0.5)
    assert serving.coverage == pytest.approx(1 / 6)
    assert report.coverage == pytest.approx((0.3 * 0.5 + 0.3 * (1 / 6)) / 0.6)
    assert scoring.signal_json(next(s for s in serving.signals
                                    if s.signal.name == "ttft_p95"))["known"] is False


def test_nothing_known_is_unknown_not_healthy():
    cfg = health_config()
    report = evaluate({"ecn_marked_ratio": [], "gpu_lost": []}, cfg)
    assert report.score is None and report.status == "unknown"
    assert report.coverage == 0.0
    assert report.detractors == []


def test_zero_weight_disables_a_signal():
    cfg = health_config("  signal_weights: {ecn_marked_ratio: 0}\n")
    report = evaluate(_measured(ecn_marked_ratio=0.5, pfc_pause_ratio=0.0), cfg)
    assert report.score == 100.0
    assert report.components["network"].coverage == 1.0


def test_counter_reset_inside_the_window():
    """A switch reboot resets the counters mid-window: the increase counts from zero, as
    Prometheus' rate() does, instead of going negative or exploding."""
    feed = Feed()
    # transmitted: 0 -> 4000 -> (reset) 1000 -> 5000 : increase 4000 + 1000 + 4000 = 9000
    # marked:      0 ->  100 -> (reset)   50 ->  200 : increase  100 +   50 +  150 =  300
    feed.series("gnmi", "infrapulse_switch_queue_transmitted_packets_total", SWQ,
                [0.0, 4000.0, 1000.0, 5000.0], "leaf03")
    feed.series("gnmi", "infrapulse_switch_queue_ecn_marked_packets_total", SWQ, [0.0, 100.0, 50.0, 200.0],
                "leaf03")
    service = service_for(feed.store)
    feed.publish(service, step_seconds=20.0)
    result = signal(service.report, "ecn_marked_ratio")
    assert result.worst.measurement.value == pytest.approx(300 / 9000)
    assert result.score == round(curve(300 / 9000, 0.001, 0.05), 2)


def test_wrap_is_never_a_negative_or_huge_rate():
    feed = Feed()
    feed.series("infiniband", "infrapulse_rdma_out_of_buffer_total", ("mlx5_0", "1"),
                [2**32 - 600.0, 2**32 - 100.0, 500.0], "mlx5_0")
    service = service_for(feed.store)
    feed.publish(service, step_seconds=30.0)
    # Without a known counter width a wrap counts as a reset (as in Prometheus): 500 + 500 over
    # 60 s, short only by the 100 counts before the wrap, never negative and never 2^32.
    assert signal(service.report, "out_of_buffer_rate").worst.measurement.value == pytest.approx(1000 / 60)


def test_top_detractor_sentence():
    feed = Feed()
    feed.counter("gnmi", "infrapulse_switch_queue_transmitted_packets_total", SWQ, 0, 10_000, "leaf03")
    feed.counter("gnmi", "infrapulse_switch_queue_ecn_marked_packets_total", SWQ, 0, 790, "leaf03")
    feed.counter("gnmi", "infrapulse_switch_queue_transmitted_packets_total", ("leaf03", "Ethernet4", "3"), 0,
                 10_000, "leaf03")
    feed.counter("gnmi", "infrapulse_switch_queue_ecn_marked_packets_total", ("leaf03", "Ethernet4", "3"), 0,
                 300, "leaf03")
    service = service_for(feed.store)
    feed.publish(service)
    top = service.report.detractors[0]
    assert top.sentence == ("leaf03 Ethernet12 queue 3: 7.9% of packets ECN-marked over the last 1m "
                            "(bad at 5%)")
    assert top.result.signal.name == "ecn_marked_ratio" and top.rank == 1
    second = service.report.detractors[1]
    assert second.target.measurement.target == "leaf03 Ethernet4 queue 3"
    assert second.sentence == ("leaf03 Ethernet4 queue 3: 3.0% of packets ECN-marked over the last 1m "
                               "(bad at 5%)")


def test_critical_detractors_rank_first_and_carry_notes():
    feed = Feed()
    feed.counter("gnmi", "infrapulse_switch_queue_transmitted_packets_total", SWQ, 0, 10_000, "leaf03")
    feed.counter("gnmi", "infrapulse_switch_queue_ecn_marked_packets_total", SWQ, 0, 5000, "leaf03")
    feed.gauge("nvml", "infrapulse_gpu_healthy", GPU_LABELS, 1)
    feed.series("nvml", "infrapulse_gpu_xid_errors_total", GPU_LABELS + ("79",),
                [None, 1.0])  # first XID ever
    feed.series("nvml", "infrapulse_gpu_xid_errors_total", GPU_LABELS + ("13",),
                [None, 4.0])  # application XID
    service = service_for(feed.store)
    feed.publish(service)
    report = service.report
    assert report.detractors[0].sentence == ("GPU 0: 1 critical XID error(s) over the last 5m "
                                             "(XID 79; bad at 1)")
    assert signal(report, "xid_other").worst.measurement.value == 0.0  # XID 13 is the application's
    assert report.firing == ["xid_critical"]
    assert report.components["gpu"].score == 0.0 and report.components["gpu"].capped_by == "xid_critical"
    # network: ecn 50% marked (0, weight 3) and the stream up (100, weight 1); gpu 0
    assert report.score == round((0.3 * 25.0 + 0.25 * 0.0) / 0.55, 2)


def test_lost_gpu_sentence_carries_the_reason():
    feed = Feed()
    feed.gauge("nvml", "infrapulse_gpu_healthy", GPU_LABELS, 0)
    feed.gauge("nvml", "infrapulse_gpu_health_status_info", GPU_LABELS + ("gpu_is_lost",), 1)
    service = service_for(feed.store)
    feed.publish(service)
    assert service.report.detractors[0].sentence == "GPU 0: GPU is lost or needs a reset (gpu_is_lost)"


def test_slo_and_threshold_overrides():
    cfg = health_config("  slo: {ttft_p95_seconds: 2.0}\n  thresholds:\n    ecn_marked_ratio: {bad: 0.1}\n")
    settings = scoring.resolve_settings(cfg)
    assert (settings["ttft_p95"].good, settings["ttft_p95"].bad) == (2.0, 4.0)
    assert (settings["ecn_marked_ratio"].good, settings["ecn_marked_ratio"].bad) == (0.001, 0.1)
    # the topology signal follows its base signal unless overridden itself
    assert settings["uplink_ecn_marked_ratio"].bad == 0.1
    report = evaluate(_measured(ttft_p95=3.0), cfg)
    assert report.components["serving"].score == pytest.approx(50.0)
    assert report.detractors[0].sentence == "t-ttft_p95: TTFT p95 3 s over the last 1m (bad at 4 s)"


@pytest.mark.parametrize("text,key", [
    ("health: {thresholds: {ecn_ratio: {good: 1, bad: 2}}}", "health.thresholds.ecn_ratio"),
    ("health: {thresholds: {ecn_marked_ratio: {good: 1, bad: 1}}}", "health.thresholds.ecn_marked_ratio"),
    ("health: {weights: {netwrk: 1}}", "health.weights.netwrk"),
    ("health: {critical_signals: [gpu_lost, nope]}", "health.critical_signals[1]"),
    ("health: {signal_weights: {nope: 1}}", "health.signal_weights.nope"),
    ("health: {window: 5x}", "health.window"),
    ("health: {critical_cap: 120}", "health.critical_cap"),
    ("health: {status_thresholds: {degraded: 40, critical: 60}}", "health.status_thresholds"),
])
def test_bad_health_config_names_the_key(text, key):
    with pytest.raises(config_mod.ConfigError) as err:
        config_mod.load_text(text, "cfg.yaml")
    assert err.value.key == key


def test_partial_weights_keep_the_other_defaults():
    cfg = config_mod.load_text("health: {weights: {gpu: 1.0}}").health
    assert cfg.weights == {"network": 0.3, "rdma": 0.15, "gpu": 1.0, "serving": 0.3, "topology": 0.1,
                           "probe": 0.15}
    assert "link_flaps" in cfg.critical_signals and "ecn_marked_ratio" not in cfg.critical_signals


def test_smoother_drops_at_once_and_eases_recovery():
    s = Smoother(recovery_seconds=10.0, hysteresis=0.0)
    assert s.apply("k", 90.0, 0.0) == 90.0
    assert s.apply("k", 30.0, 5.0) == 30.0  # a drop is published immediately
    eased = s.apply("k", 100.0, 15.0)  # 10 s later: 1 - e^-1 of the way
    assert eased == pytest.approx(30.0 + 70.0 * (1 - 0.36787944), rel=1e-6)
    assert s.apply("k", None, 20.0) is None  # unknown resets the state
    assert s.apply("k", 100.0, 21.0) == 100.0


def test_smoother_hysteresis_ignores_wiggles_but_not_status_changes():
    s = Smoother(hysteresis=3.0)
    assert s.apply("k", 85.0, 0.0) == 85.0
    assert s.apply("k", 83.0, 1.0) == 85.0
    assert s.apply("k", 87.5, 2.0) == 85.0
    assert s.apply("k", 81.0, 3.0) == 81.0
    assert s.apply("k", 79.5, 4.0, force=True) == 79.5


def test_service_publishes_the_health_families():
    from helpers import render_store

    feed = Feed()
    feed.counter("gnmi", "infrapulse_switch_queue_transmitted_packets_total", SWQ, 0, 10_000, "leaf03")
    feed.counter("gnmi", "infrapulse_switch_queue_ecn_marked_packets_total", SWQ, 0, 790, "leaf03")
    service = service_for(feed.store)
    feed.publish(service)
    _declare_test_families()
    values = render_store(feed.store)
    # network: ecn_marked_ratio 7.9% -> 0 (weight 3), gnmi stream up -> 100 (weight 1)
    assert values[("infrapulse_health_score", frozenset())] == pytest.approx(25.0)
    assert values[("infrapulse_health_component_score", frozenset({("component", "network")}))] == 25.0
    assert values[("infrapulse_health_signal_score",
                   frozenset({("component", "network"), ("signal", "ecn_marked_ratio")}))] == 0.0
    detractor = frozenset({("rank", "1"), ("component", "network"), ("signal", "ecn_marked_ratio"),
                           ("target", "leaf03 Ethernet12 queue 3")})
    assert values[("infrapulse_health_detractor_info", detractor)] == 1.0
    coverage = values[("infrapulse_health_coverage_ratio", frozenset())]
    assert 0 < coverage < 1


def _declare_test_families():
    """Families a test publishes by hand must be known to the catalogue to render /metrics."""
    from infrapulse.sources import registry

    registry()  # the real declarations first, so nothing here can conflict with them
