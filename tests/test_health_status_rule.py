"""The status is the worst of the score's band and each signal's state (docs/health.md, step 6),
and the detractors group one signal's members so distinct problems all appear.

The three scenarios that read "healthy" while paging (issue 32): a +41 % probe latency
regression, 5 % mesh loss to one peer, and a DCQCN reset by a firmware upgrade — each alone in
an otherwise healthy node keeps the weighted score above 80, and each must read degraded.
"""

from __future__ import annotations

import pytest

from health_fixtures import health_config
from infrapulse.health import scoring
from infrapulse.health.scoring import evaluate
from infrapulse.health.signals import Measurement
from infrapulse.health.signals.probe import target_name
from infrapulse.sources.probe.versions import changed

SIZES = ("8", "16", "32", "64", "128")


def _healthy() -> dict[str, list[Measurement]]:
    """A node whose every component has data and is good: the weighted score is 100."""
    return {
        "ecn_marked_ratio": [Measurement("leaf01 Ethernet0 queue 3", 0.0)],
        "pfc_pause_ratio": [Measurement("ens1f0np0 priority 3", 0.0)],
        "retransmission_rate": [Measurement("mlx5_0 port 1", 0.0)],
        "gpu_lost": [Measurement("GPU 0", 0.0)],
        "throttle_active": [Measurement("GPU 0", 0.0)],
        "ttft_p95": [Measurement("endpoint llama", 0.2)],
        "endpoint_down": [Measurement("endpoint llama", 0.0)],
        "mesh_rtt_p99": [Measurement("peer gpu-node-02", 50e-6)],
        "roce_config_drift": [Measurement("ens1f0np0", 0.0)],
        "roce_ecn_np_off": [Measurement("ens1f0np0 priority 3", 0.0)],
    }


def _probe(ratio_by_size: dict[str, float]) -> list[Measurement]:
    out = []
    for size, worse in ratio_by_size.items():
        labels = {"scope": "local", "test": "all_reduce", "metric": "latency", "size": size}
        out.append(Measurement(target_name(labels), worse, "since fw 28.39.1002 → 28.41.1000", labels=labels))
    return out


def _reasons(report: scoring.Report) -> list[tuple[str, str, str]]:
    return [(r.status, r.rule, r.signal) for r in report.status_reasons]


@pytest.mark.parametrize("signal,measurements", [
    ("probe_latency_regression", _probe({"8": 0.41})),
    ("mesh_loss", [Measurement("peer gpu-node-03", 0.05, labels={"peer": "gpu-node-03"})]),
    ("roce_config_drift", [Measurement("ens1f0np0", 3.0, "np_enable 1->0, rp_min_rate 1->0, ...")]),
    ("roce_ecn_np_off", [Measurement("ens1f0np0 priority 3", 1.0)]),
])
def test_one_signal_at_its_bad_level_is_degraded_whatever_the_mean(signal, measurements):
    measured = _healthy()
    measured[signal] = measurements
    report = evaluate(measured, health_config())
    assert report.score is not None and report.score >= 80.0  # the band alone would say healthy
    assert report.status == "degraded"
    assert _reasons(report) == [("degraded", "signal_past_bad", signal)]
    reason = report.status_reasons[0]
    assert reason.target == measurements[0].target and reason.targets == 1
    component = reason.component
    # the component reads its own band too: probe's mean of 40 with one of two signals at 0 is critical
    assert report.component_status[component] != "healthy"
    assert all(s == "healthy" for name, s in report.component_status.items()
               if name != component and report.components[name].applicable)


def test_a_signal_short_of_bad_leaves_a_high_score_healthy():
    measured = _healthy()
    measured["probe_latency_regression"] = _probe({"8": 0.25})  # between good 0.1 and bad 0.4
    report = evaluate(measured, health_config())
    assert report.status == "healthy" and report.status_reasons == []


def test_a_critical_signal_at_bad_is_critical_and_says_so():
    measured = _healthy()
    measured["gpu_lost"] = [Measurement("GPU 3", 1.0, "fell off the bus")]
    report = evaluate(measured, health_config())
    assert report.status == "critical"
    assert ("critical", "critical_signal", "gpu_lost") in _reasons(report)
    assert report.component_status["gpu"] == "critical"


def test_an_slo_past_its_objective_is_a_reason():
    measured = _healthy()
    measured["ttft_p95"] = [Measurement("endpoint llama", 2.0)]  # objective 1.5 s, bad 3 s
    report = evaluate(measured, health_config())
    assert report.status == "degraded"
    assert _reasons(report) == [("degraded", "slo_breached", "ttft_p95")]


def test_below_the_coverage_floor_healthy_reads_unknown_with_the_reason():
    # one gNMI signal of the many a fabric collector applies (a wrong profile maps nothing else)
    measured: dict[str, list[Measurement] | None] = {
        "gnmi_stream_down": [Measurement("leaf01", 0.0)],
        "ecn_marked_ratio": [], "pfc_pause_ratio": [], "queue_drop_ratio": [], "link_flaps": [],
        "phy_error_rate": [], "pfc_pause_frames_rate": [], "pfc_storm_events": []}
    report = evaluate(measured, health_config())
    assert report.score == 100.0 and report.coverage < 0.2
    assert report.status == "unknown"
    assert _reasons(report) == [("unknown", "coverage_below_floor", "")]
    assert f"{report.coverage:.0%}" in report.status_reasons[0].text
    off = evaluate(measured, health_config("  coverage_floor: 0\n"))
    assert off.status == "healthy" and off.status_reasons == []


def test_a_degraded_signal_is_not_hidden_by_low_coverage():
    measured: dict[str, list[Measurement] | None] = {
        "ecn_marked_ratio": [Measurement("leaf01 Ethernet0 queue 3", 0.06)],
        "pfc_pause_ratio": [], "queue_drop_ratio": [], "link_flaps": [], "phy_error_rate": [],
        "pfc_pause_frames_rate": [], "pfc_storm_events": [], "gnmi_stream_down": []}
    report = evaluate(measured, health_config())
    assert report.status == "critical"  # its score is 0: the band is critical; no "unknown"
    assert [r.rule for r in report.status_reasons] == ["score_band", "signal_past_bad"]


def test_the_three_issue_scenarios_together_each_appear_in_the_detractors():
    """fw-upgrade-regression (five sizes +40-41 %), mesh-loss and fw-upgrade-cc-reset at once: the
    five sizes are one detractor (worst first, with a count), so the mesh loss and the CC drift
    are listed too, and the status names all three."""
    measured = _healthy()
    measured["probe_latency_regression"] = _probe(dict(zip(SIZES, (0.40, 0.41, 0.405, 0.40, 0.40))))
    measured["mesh_loss"] = [Measurement("peer gpu-node-03", 0.05, labels={"peer": "gpu-node-03"})]
    measured["roce_config_drift"] = [Measurement("ens1f0np0", 4.0)]
    report = evaluate(measured, health_config())
    assert report.status == "degraded"
    assert {r.signal for r in report.status_reasons} == {"probe_latency_regression", "mesh_loss",
                                                          "roce_config_drift"}
    probe_reason = next(r for r in report.status_reasons if r.signal == "probe_latency_regression")
    assert probe_reason.targets == 5 and probe_reason.target == "all_reduce 16 B latency"
    signals = [d.result.signal.name for d in report.detractors]
    assert sorted(signals) == ["mesh_loss", "probe_latency_regression", "roce_config_drift"]
    probe = next(d for d in report.detractors if d.result.signal.name == "probe_latency_regression")
    assert probe.members == 5
    assert probe.target.measurement.target == "all_reduce 16 B latency"  # the worst member leads
    assert probe.member_names[0] == "16 B" and sorted(probe.member_names) == sorted(
        ["8 B", "16 B", "32 B", "64 B", "128 B"])
    assert "worst of 5 message sizes (16 B, 32 B, " in probe.sentence
    assert "since fw 28.39.1002 → 28.41.1000" in probe.sentence
    body = scoring.report_json(report)
    first = next(d for d in body["detractors"] if d["signal"] == "probe_latency_regression")
    assert first["members"] == 5 and first["member_names"] == probe.member_names
    assert [r["rule"] for r in body["status_reasons"]] == ["signal_past_bad"] * 3


def test_two_tests_of_one_signal_stay_two_detractors():
    measured = _healthy()
    rows = _probe({"8": 0.5})
    labels = {"scope": "local", "test": "all_gather", "metric": "latency", "size": "8"}
    rows.append(Measurement(target_name(labels), 0.5, labels=labels))
    measured["probe_latency_regression"] = rows
    report = evaluate(measured, health_config())
    targets = sorted(d.target.measurement.target for d in report.detractors)
    assert targets == ["all_gather 8 B latency", "all_reduce 8 B latency"]
    assert all(d.members == 1 for d in report.detractors)


@pytest.mark.parametrize("before,after,expected", [
    ({"nic_firmware": "28.39.1002"}, {"nic_firmware": "28.41.1000"}, ("28.39.1002", "28.41.1000")),
    ({"nic_firmware": "0.2,28.39.1002"}, {"nic_firmware": "0.2,28.41.1000"}, ("28.39.1002", "28.41.1000")),
    # one NIC was upgraded earlier (fw-upgrade-cc-reset), then the rest join it: the change went *to*
    # the version the first one already ran, never "to none"
    ({"nic_firmware": "28.39.1002,28.41.1000"}, {"nic_firmware": "28.41.1000"}, ("28.39.1002", "28.41.1000")),
    # one of two NICs moves to a new version while the other stays: from the old one
    ({"nic_firmware": "28.39.1002"}, {"nic_firmware": "28.39.1002,28.41.1000"}, ("28.39.1002", "28.41.1000")),
    ({"nccl": "2.21.5"}, {}, ("2.21.5", "")),  # a component that went away
])
def test_a_version_change_names_the_version_it_went_to(before, after, expected):
    (component, got), = changed(before, after).items()
    assert got == expected
