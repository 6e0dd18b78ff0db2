"""The probe component of the health score: the before/after sentence, the critical wrong-results
cap, and the latency mesh signals both without their families (no data, nothing else breaks)
and with them declared as the mesh module declares them (in a fresh interpreter)."""

from __future__ import annotations

import pytest

from health_fixtures import Feed, service_for, signal
from infrapulse.health.signals import SIGNALS

KEY = ("local", "intra_node", "all_reduce")


def test_the_regression_sentence_names_the_version_change():
    feed = Feed()
    feed.gauge("probe", "infrapulse_probe_baseline_ratio", KEY + ("latency", "8"), 1.38, "probe")
    feed.gauge("probe", "infrapulse_probe_change_ratio",
               KEY + ("latency", "8", "nic_firmware", "28.39.1002", "28.41.1000"), 1.38, "probe")
    feed.gauge("probe", "infrapulse_probe_baseline_ratio", ("mlx5_0->mlx5_1", "fabric", "ib_write_lat",
                                                            "latency_p99", "8"), 1.05, "probe")
    service = service_for(feed.store)
    feed.publish(service)
    top = service.report.detractors[0]
    assert top.sentence == ("all_reduce 8 B latency: +38.0% vs baseline "
                            "(since fw 28.39.1002 → 28.41.1000; bad at 40%)")
    result = signal(service.report, "probe_latency_regression")
    assert [t.measurement.target for t in result.targets] == [
        "all_reduce 8 B latency", "ib_write_lat mlx5_0->mlx5_1 8 B p99 latency"]
    assert result.score == round(100.0 * (0.4 - 0.38) / 0.3, 2)  # scores are rounded once, to 2 digits
    assert service.report.components["probe"].score == pytest.approx(result.score)  # the only one known


def test_wrong_results_cap_the_overall_score():
    feed = Feed()
    feed.gauge("probe", "infrapulse_probe_nccl_wrong_elements", KEY + ("float", "sum", "1024",
                                                                       "out_of_place"),
               262144, "probe")
    feed.gauge("probe", "infrapulse_probe_baseline_ratio", KEY + ("latency", "8"), 1.0, "probe")
    service = service_for(feed.store)
    feed.publish(service)
    report = service.report
    assert report.detractors[0].sentence == \
        "all_reduce local: collective returned wrong results (262,144 wrong elements)"
    assert report.score is not None and report.score <= 40.0  # critical_cap


def test_mesh_signals_have_no_data_on_a_node_without_the_mesh():
    feed = Feed()
    feed.gauge("probe", "infrapulse_probe_baseline_ratio", KEY + ("latency", "8"), 1.1, "probe")
    service = service_for(feed.store)
    feed.publish(service)
    for name in ("mesh_loss", "mesh_rtt_p99"):
        result = signal(service.report, name)
        assert not result.applicable and not result.known
    assert service.report.components["probe"].score is not None


def test_mesh_signals_read_the_mesh_families():
    feed = Feed()
    feed.counter("mesh", "infrapulse_probe_mesh_sent_total", ("gpu-node-07",), 0, 2000, "mesh")
    feed.counter("mesh", "infrapulse_probe_mesh_lost_total", ("gpu-node-07",), 0, 50, "mesh")
    feed.counter("mesh", "infrapulse_probe_mesh_sent_total", ("gpu-node-02",), 0, 2000, "mesh")
    feed.counter("mesh", "infrapulse_probe_mesh_lost_total", ("gpu-node-02",), 0, 0, "mesh")
    feed.gauge("mesh", "infrapulse_probe_mesh_rtt_p99_seconds", ("gpu-node-07",), 0.0011, "mesh")
    service = service_for(feed.store)
    feed.publish(service)
    loss, rtt = signal(service.report, "mesh_loss"), signal(service.report, "mesh_rtt_p99")
    assert sorted(SIGNALS["mesh_loss"].families + SIGNALS["mesh_rtt_p99"].families) == [
        "infrapulse_probe_mesh_lost_total", "infrapulse_probe_mesh_rtt_p99_seconds",
        "infrapulse_probe_mesh_sent_total"]
    assert [[t.measurement.target, t.measurement.value] for t in loss.targets] == [
        ["peer gpu-node-07", 0.025], ["peer gpu-node-02", 0.0]]
    assert [t.measurement.target for t in rtt.targets] == ["peer gpu-node-07"]
    assert rtt.targets[0].measurement.value == 0.0011
    assert rtt.targets[0].score == pytest.approx(100.0 * (0.002 - 0.0011) / 0.0018)
    sentences = [d.sentence for d in service.report.detractors]
    # one detractor per target, naming every signal that scores it
    assert sentences == ["peer gpu-node-07: mesh RTT p99 1.1 ms (bad at 2 ms); "
                         "also scored by mesh_loss (probe): 2.5% of mesh probes lost"]
