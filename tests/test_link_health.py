"""Link health: BER derivation (with and without rx_bits_phy), the per-port classes and their
boundaries, sentences naming the switch port behind a NIC through LLDP, and /api/v1/health."""

from __future__ import annotations

import pytest

from health_fixtures import HOST, Feed, service_for, signal
from infrapulse.health.scoring import report_json
from infrapulse.health.signals import Measurement
from infrapulse.health.signals.link import DEGRADED, FLAPPING, HALF_DEAD, HEALTHY, classify

IF = ("ens1f0np0",)
BAD = {"link_flaps": 3.0, "link_half_dead": 2.0, "link_post_fec_ber": 1e-12, "link_pre_fec_ber_rise": 10.0,
       "phy_error_rate": 1.0}


def lldp(feed: Feed, interface: str = "ens1f0np0", host: str = HOST) -> None:
    """leaf01 Ethernet8's LLDP neighbour is this host's `interface` (FQDN, as switches often show it)."""
    feed.gauge("gnmi", "infrapulse_switch_lldp_neighbor_info",
               ("leaf01", "Ethernet8", f"{host}.cluster.local", interface), 1, "leaf01")


def report_of(feed: Feed, extra: str = ""):
    service = service_for(feed.store, extra)
    feed.publish(service)
    return service.report


# -- BER ---------------------------------------------------------------------------------------


def test_post_fec_ber_divides_by_rx_bits_when_the_driver_counts_them():
    feed = Feed()
    feed.counter("ethtool", "infrapulse_nic_phy_errors_total", IF + ("pcs_symbol",), 10, 10 + 300)
    feed.counter("ethtool", "infrapulse_nic_phy_errors_total", IF + ("crc",), 0, 9e9)  # not the numerator
    feed.counter("ethtool", "infrapulse_nic_received_bits_total", IF, 0, 1.5e14)
    feed.gauge("ethtool", "infrapulse_nic_link_speed_bytes_per_second", IF, 50e9)
    (target,) = signal(report_of(feed), "link_post_fec_ber").targets
    assert target.measurement.value == pytest.approx(300 / 1.5e14)
    assert target.measurement.labels == {"interface": "ens1f0np0", "basis": "rx_bits"}
    assert target.measurement.note.startswith("bits = rx_bits_phy")


def test_post_fec_ber_without_rx_bits_uses_link_speed_times_time_and_says_so():
    feed = Feed()
    feed.counter("ethtool", "infrapulse_nic_phy_errors_total", IF + ("pcs_symbol",), 0, 48)
    feed.gauge("ethtool", "infrapulse_nic_link_speed_bytes_per_second", IF, 12.5e9)  # 100 Gb/s
    report = report_of(feed)
    (target,) = signal(report, "link_post_fec_ber").targets
    assert target.measurement.value == pytest.approx(48 / (100e9 * 60))  # 8e-12: past 1e-12
    assert target.measurement.labels["basis"] == "speed"
    assert "bits = link speed x time (no rx_bits counter)" in target.measurement.note
    assert report.links == [{"port": "ens1f0np0", "state": DEGRADED, "evidence": "post-FEC BER 8e-12"}]


def test_no_bits_and_no_speed_means_no_ber_not_zero():
    feed = Feed()
    feed.counter("ethtool", "infrapulse_nic_phy_errors_total", IF + ("pcs_symbol",), 0, 48)
    assert signal(report_of(feed), "link_post_fec_ber").targets == []


def test_pre_fec_rise_needs_a_baseline_before_the_window():
    feed = Feed()  # two readings a window apart: no span before the window, so no factor yet
    feed.counter("ethtool", "infrapulse_nic_fec_corrected_bits_total", IF, 0, 1e6)
    feed.counter("ethtool", "infrapulse_nic_received_bits_total", IF, 0, 1e12)
    assert signal(report_of(feed), "link_pre_fec_ber_rise").targets == []


def test_pre_fec_rise_is_floored_so_a_clean_link_does_not_explode():
    feed = Feed()  # baseline 0 corrected bits, then 1e-9: 1e-9 / max(0, floor 1e-9) = 1
    feed.series("ethtool", "infrapulse_nic_received_bits_total", IF, [0.0, 1e12, 2e12])
    feed.series("ethtool", "infrapulse_nic_fec_corrected_bits_total", IF, [0.0, 0.0, 1e3])
    (target,) = signal(report_of(feed), "link_pre_fec_ber_rise").targets
    assert target.measurement.value == pytest.approx(1.0)
    assert target.measurement.note.startswith("pre-FEC BER 1e-09, baseline 0")


# -- classes and their boundaries ----------------------------------------------------------------


def m(target: str, value: float, note: str = "") -> Measurement:
    return Measurement(target, value, note, {"interface": target})


@pytest.mark.parametrize("measured,state", [
    ({"link_flaps": [m("e0", 3.0)]}, FLAPPING),  # >= 3 transitions
    ({"link_flaps": [m("e0", 2.0)]}, HEALTHY),  # one down and up again: not yet
    ({"link_flaps": [m("e0", 0.0)], "link_half_dead": [m("e0", 2.0)]}, HALF_DEAD),
    ({"link_flaps": [m("e0", 0.0)], "link_half_dead": [m("e0", 1.0)]}, HEALTHY),
    # CRC bursts while the carrier stays up are half-dead too (phy_error_rate at its bad level)
    ({"link_flaps": [m("e0", 0.0)], "phy_error_rate": [m("e0", 1.0, "CRC (FCS) errors")]}, HALF_DEAD),
    ({"link_flaps": [m("e0", 2.0)], "phy_error_rate": [m("e0", 5.0, "CRC (FCS) errors")]}, HEALTHY),
    ({"link_post_fec_ber": [m("e0", 1e-12)]}, DEGRADED),
    ({"link_post_fec_ber": [m("e0", 0.99e-12)]}, HEALTHY),
    ({"link_pre_fec_ber_rise": [m("e0", 10.0)]}, DEGRADED),
    ({"link_pre_fec_ber_rise": [m("e0", 9.9)]}, HEALTHY),
    # precedence: flapping > half-dead > degraded
    ({"link_flaps": [m("e0", 4.0)], "link_half_dead": [m("e0", 5.0)], "link_post_fec_ber": [m("e0", 1.0)]},
     FLAPPING),
    ({"link_flaps": [m("e0", 0.0)], "link_half_dead": [m("e0", 5.0)], "link_post_fec_ber": [m("e0", 1.0)]},
     HALF_DEAD),
])
def test_class_boundaries(measured, state):
    assert classify(measured, BAD)["e0"].state == state


def test_thresholds_come_from_the_health_config():
    feed = Feed()
    feed.counter("ethtool", "infrapulse_nic_carrier_changes_total", IF, 0, 4)
    assert report_of(feed).links[0]["state"] == FLAPPING
    feed = Feed()
    feed.counter("ethtool", "infrapulse_nic_carrier_changes_total", IF, 0, 4)
    relaxed = report_of(feed, "  thresholds: {link_flaps: {bad: 6}}\n")
    assert relaxed.links == [{"port": "ens1f0np0", "state": HEALTHY, "evidence": ""}]
    assert signal(relaxed, "link_flaps").score == 33.33  # 100 x (6 - 4) / 6, rounded once


def test_switch_ports_are_scored_but_not_classified():
    measured = {"link_flaps": [Measurement("leaf01 Ethernet8", 9.0, "", {"switch": "leaf01"})]}
    assert classify(measured, BAD) == {}


# -- sentences: the port, the evidence, the switch port behind it ------------------------------


def test_half_dead_sentence_names_port_evidence_and_lldp_switch_port():
    feed = Feed()
    lldp(feed)
    feed.counter("ethtool", "infrapulse_nic_link_recoveries_total", IF, 2, 2 + 14)
    feed.counter("ethtool", "infrapulse_nic_carrier_changes_total", IF, 1, 1)
    feed.counter("ethtool", "infrapulse_nic_link_down_events_total", IF, 0, 0)
    report = report_of(feed)
    (detractor,) = [d for d in report.detractors if d.result.signal.name == "link_half_dead"]
    assert detractor.sentence == (
        "ens1f0np0: half-dead: retrained 14 time(s) without losing carrier over the last 1m "
        "(14 PHY recoveries, carrier steady; switch port leaf01 Ethernet8 (LLDP); bad at 2)")
    assert "link_half_dead" in report.firing
    assert report.links == [{"port": "ens1f0np0", "state": HALF_DEAD,
                             "evidence": "14 retrains without carrier loss"}]
    assert report_json(report)["links"] == report.links


def test_flap_sentence_counts_carrier_changes_and_names_the_switch_port():
    feed = Feed()
    lldp(feed)
    feed.counter("ethtool", "infrapulse_nic_carrier_changes_total", IF, 1, 7)
    feed.counter("ethtool", "infrapulse_nic_link_down_events_total", IF, 0, 3)
    feed.counter("ethtool", "infrapulse_nic_link_recoveries_total", IF, 0, 9)  # part of the flapping
    report = report_of(feed)
    (flap,) = [d for d in report.detractors if d.result.signal.name == "link_flaps"]
    assert flap.sentence == (
        "ens1f0np0: flapping: 6 carrier transition(s) over the last 1m (6 carrier changes, 3 PHY link-down "
        "events; switch port leaf01 Ethernet8 (LLDP); bad at 3)")
    (half,) = signal(report, "link_half_dead").targets
    assert half.measurement.value == 0.0  # the retrains came with carrier loss: not half-dead
    assert report.links[0]["state"] == FLAPPING


def test_a_port_with_no_lldp_neighbour_says_so():
    feed = Feed()
    lldp(feed, interface="ens2f0np0")  # the switch sees another NIC of this host
    lldp_other = Feed(feed.store)
    lldp(lldp_other, host="gpu-node-99")  # and this NIC's name on another host
    feed.counter("ethtool", "infrapulse_nic_carrier_changes_total", IF, 0, 3)
    (target,) = signal(report_of(feed), "link_flaps").targets
    assert target.measurement.note.endswith("no LLDP neighbour names this port")


def test_ib_link_downed_is_flapping_on_its_own_but_not_on_roce():
    feed = Feed()
    feed.gauge("infiniband", "infrapulse_rdma_port_info", ("mlx5_4", "1", "InfiniBand", ""), 1, "mlx5_4")
    roce = ("mlx5_0", "1", "Ethernet", "ens1f0np0")
    feed.gauge("infiniband", "infrapulse_rdma_port_info", roce, 1, "mlx5_0")
    feed.counter("infiniband", "infrapulse_rdma_port_link_downed_total", ("mlx5_4", "1"), 0, 1, "mlx5_4")
    feed.counter("infiniband", "infrapulse_rdma_port_link_downed_total", ("mlx5_0", "1"), 0, 5, "mlx5_0")
    report = report_of(feed)
    flaps = {t.measurement.target: t.measurement.value for t in signal(report, "link_flaps").targets}
    assert flaps == {"mlx5_4 port 1": 3.0}
    assert report.links == [{"port": "mlx5_4 port 1", "state": FLAPPING, "evidence": "3 transitions"}]
