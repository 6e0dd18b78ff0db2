"""Every signal, table-driven: inputs that measure `x` -> the value and the sub-score at the good
threshold (100), the bad threshold (0) and midway (50). That importing the signals alone declares
every family they read is checked in a fresh interpreter in
tests/integration/test_health_signals_interpreter.py."""

from __future__ import annotations

import pytest

from health_fixtures import HOST, Feed, empty_histogram, latency_histogram, service_for, signal
from infrapulse.health.signals import SIGNALS

SWQ = ("leaf03", "Ethernet12", "3")
SWP = ("leaf03", "Ethernet12", "3", "rx")
PORT = ("mlx5_0", "1")
GPU = ("0", "GPU-aaaa")
EP = ("llama", "vllm", "llama-3-70b")


def _ecn(f, x):
    f.counter("gnmi", "infrapulse_switch_queue_transmitted_packets_total", SWQ, 0, 10_000, "leaf03")
    f.counter("gnmi", "infrapulse_switch_queue_ecn_marked_packets_total", SWQ, 0, x * 10_000, "leaf03")


def _nic_ecn(f, x):
    f.counter("infiniband", "infrapulse_rdma_port_received_packets_total", PORT, 0, 10_000, "mlx5_0")
    f.counter("infiniband", "infrapulse_rdma_ecn_marked_packets_total", PORT, 0, x * 10_000, "mlx5_0")


def _nic_prio_ecn(f, x):
    f.gauge("infiniband", "infrapulse_rdma_port_info", ("mlx5_0", "1", "Ethernet", "ens1f0np0"), 1, "mlx5_0")
    f.counter("infiniband", "infrapulse_rdma_port_received_packets_total", PORT, 0, 10_000, "mlx5_0")
    f.counter("ethtool", "infrapulse_nic_ecn_marked_packets_total", ("ens1f0np0", "3"), 0, x * 10_000)


def _pfc_ratio(f, x):
    f.counter("gnmi", "infrapulse_switch_pfc_pause_duration_seconds_total", SWP, 0, x * 60, "leaf03")
    f.counter("gnmi", "infrapulse_switch_pfc_pause_frames_total", SWP, 0, 1e6, "leaf03")


def _nic_pfc_ratio(f, x):
    f.counter("ethtool", "infrapulse_nic_pfc_pause_duration_seconds_total", ("ens1f0np0", "3", "rx"), 0,
              x * 60)


def _pfc_frames(f, x):
    f.counter("gnmi", "infrapulse_switch_pfc_pause_frames_total", SWP, 0, x * 60, "leaf03")


def _storms(f, x):
    f.counter("ethtool", "infrapulse_nic_pause_storm_events_total", ("ens1f0np0", "warning"), 0, x)


def _drops(f, x):
    f.counter("gnmi", "infrapulse_switch_queue_dropped_packets_total", SWQ, 0, x * 1e6, "leaf03")
    f.counter("gnmi", "infrapulse_switch_queue_transmitted_packets_total", SWQ, 0, 1e6 - x * 1e6, "leaf03")


def _fcs(f, x):
    f.counter("gnmi", "infrapulse_switch_interface_fcs_errors_total", SWQ[:2], 0, x * 60, "leaf03")


def _nic_phy(f, x):
    # mlx5 counts one corrupted frame in crc, symbol and pcs_symbol alike: one kind is read.
    for kind in ("crc", "symbol", "pcs_symbol"):
        f.counter("ethtool", "infrapulse_nic_phy_errors_total", ("ens1f0np0", kind), 386, 386 + x * 60)
    f.counter("ethtool", "infrapulse_nic_phy_errors_total", ("ens1f0np0", "transmit"), 0,
              1e6)  # oversize tx drops


def _ib_symbol(f, x):
    f.gauge("infiniband", "infrapulse_rdma_port_info", ("mlx5_0", "1", "InfiniBand", ""), 1, "mlx5_0")
    f.counter("infiniband", "infrapulse_rdma_port_symbol_errors_total", PORT, 0, x * 60, "mlx5_0")


def _nic_global_pause(f, x):
    f.counter("ethtool", "infrapulse_nic_global_pause_duration_seconds_total", ("ens1f0np0", "tx"), 5961.28,
              5961.28 + x * 60)


def _global_pause_frames(f, x):
    f.counter("ethtool", "infrapulse_nic_global_pause_frames_total", ("ens1f0np0", "rx"), 0, x * 60)


def _flaps(f, x):
    f.counter("gnmi", "infrapulse_switch_interface_carrier_transitions_total", SWQ[:2], 10, 10 + x,
              "leaf03")


def _switch_port_down(f, x):
    f.gauge("gnmi", "infrapulse_switch_interface_oper_up", SWQ[:2], 1 - x, "leaf03")
    f.gauge("gnmi", "infrapulse_switch_lldp_neighbor_info", SWQ[:2] + ("gpu-node-09", "ens2f0np0"), 1,
            "leaf03")
    # a never-cabled port that is down is not measured at all
    f.gauge("gnmi", "infrapulse_switch_interface_oper_up", ("leaf03", "Ethernet48"), 0, "leaf03")


def _link_downed(f, x):
    # One link_downed increase is three transitions (error recovery, down, up): flapping on its own.
    f.gauge("infiniband", "infrapulse_rdma_port_info", ("mlx5_0", "1", "InfiniBand", ""), 1, "mlx5_0")
    f.counter("infiniband", "infrapulse_rdma_port_link_downed_total", PORT, 3, 3 + x / 3, "mlx5_0")


def _nic_link_down(f, x):
    # No sysfs carrier counter: each PHY link-down event is two transitions.
    f.gauge("infiniband", "infrapulse_rdma_port_info", ("mlx5_0", "1", "Ethernet", "ens1f0np0"), 1, "mlx5_0")
    f.counter("infiniband", "infrapulse_rdma_port_link_downed_total", PORT, 3, 50, "mlx5_0")  # not on RoCE
    f.counter("ethtool", "infrapulse_nic_link_down_events_total", ("ens1f0np0",), 7, 7 + x / 2)


def _nic_carrier(f, x):
    # sysfs carrier_changes beats 2 x link-down events when it saw more (one series per interface).
    f.counter("ethtool", "infrapulse_nic_carrier_changes_total", ("ens1f0np0",), 5, 5 + x)
    f.counter("ethtool", "infrapulse_nic_link_down_events_total", ("ens1f0np0",), 7, 7 + x / 4)


def _nic_half_dead(f, x):
    f.counter("ethtool", "infrapulse_nic_link_recoveries_total", ("ens1f0np0",), 5, 5 + x)
    f.counter("ethtool", "infrapulse_nic_carrier_changes_total", ("ens1f0np0",), 3, 3)  # carrier steady


def _ib_half_dead(f, x):
    f.gauge("infiniband", "infrapulse_rdma_port_info", ("mlx5_0", "1", "InfiniBand", ""), 1, "mlx5_0")
    f.counter("infiniband", "infrapulse_rdma_port_link_error_recovery_total", PORT, 1, 1 + x, "mlx5_0")
    f.counter("infiniband", "infrapulse_rdma_port_link_downed_total", PORT, 0, 0, "mlx5_0")


def _post_fec_rx_bits(f, x):
    f.counter("ethtool", "infrapulse_nic_phy_errors_total", ("ens1f0np0", "pcs_symbol"), 0, x * 1e14)
    f.counter("ethtool", "infrapulse_nic_received_bits_total", ("ens1f0np0",), 0, 1e14)
    f.gauge("ethtool", "infrapulse_nic_link_speed_bytes_per_second", ("ens1f0np0",), 1)  # not used


def _post_fec_speed(f, x):
    # No rx_bits_phy: bits = 400 Gb/s x the 60 s between the readings.
    f.counter("ethtool", "infrapulse_nic_phy_errors_total", ("ens1f0np0", "pcs_symbol"), 0, x * 400e9 * 60)
    f.gauge("ethtool", "infrapulse_nic_link_speed_bytes_per_second", ("ens1f0np0",), 50e9)


def _post_fec_ib(f, x):
    f.gauge("infiniband", "infrapulse_rdma_port_info", ("mlx5_0", "1", "InfiniBand", ""), 1, "mlx5_0")
    f.gauge("infiniband", "infrapulse_rdma_port_rate_bytes_per_second", PORT, 25e9, "mlx5_0")
    f.counter("infiniband", "infrapulse_rdma_port_symbol_errors_total", PORT, 0, x * 200e9 * 60, "mlx5_0")


def _pre_fec_rise(f, x):
    # Three readings a minute apart: the minute before the 1m link window is the baseline (1e-9).
    f.series("ethtool", "infrapulse_nic_received_bits_total", ("ens1f0np0",), [0.0, 1e12, 2e12])
    f.series("ethtool", "infrapulse_nic_fec_corrected_bits_total", ("ens1f0np0",),
             [0.0, 1e3, 1e3 + x * 1e3])


def _gnmi_down(f, x):
    f.gauge("gnmi", "infrapulse_switch_up", ("leaf03",), 1 - x, "leaf03")


def _cnp(f, x):
    f.counter("infiniband", "infrapulse_rdma_cnp_sent_total", PORT, 0, x * 30, "mlx5_0")
    f.counter("infiniband", "infrapulse_rdma_cnp_handled_total", PORT, 0, x * 30, "mlx5_0")


def _retrans(f, x):
    f.counter("infiniband", "infrapulse_rdma_retransmission_events_total", PORT + ("packet_seq_err",), 0,
              x * 20, "mlx5_0")
    f.counter("infiniband", "infrapulse_rdma_retransmission_events_total", PORT + ("local_ack_timeout_err",),
              0, x * 40, "mlx5_0")


def _oob(f, x):
    f.counter("infiniband", "infrapulse_rdma_out_of_buffer_total", PORT, 0, x * 60, "mlx5_0")


def _port_state(f, x):
    f.gauge("infiniband", "infrapulse_rdma_port_state", PORT, 1 if x else 4, "mlx5_0")


def _rdma_errors(f, x):
    f.counter("infiniband", "infrapulse_rdma_port_receive_errors_total", PORT, 0, x * 1e6, "mlx5_0")
    f.counter("infiniband", "infrapulse_rdma_port_received_packets_total", PORT, 0, 1e6 - x * 1e6, "mlx5_0")


def _gpu_known(f):
    f.gauge("nvml", "infrapulse_gpu_healthy", GPU, 1)


def _xid(xid):
    def build(f, x):
        _gpu_known(f)
        f.counter("nvml", "infrapulse_gpu_xid_errors_total", GPU + (xid,), 2, 2 + x)
    return build


def _ecc(f, x):
    f.gauge("nvml", "infrapulse_gpu_ecc_errors_total", GPU + ("uncorrected", "volatile"), x)
    f.gauge("nvml", "infrapulse_gpu_ecc_errors_total", GPU + ("corrected", "volatile"), 500)


def _flag_gpu(family):
    def build(f, x):
        f.gauge("nvml", family, GPU, x)
    return build


def _throttle(f, x):
    _gpu_known(f)
    f.gauge("nvml", "infrapulse_gpu_clock_event_active", GPU + ("hw_thermal",), x)
    f.gauge("nvml", "infrapulse_gpu_clock_event_active", GPU + ("power_cap",), 1)  # not a hardware slowdown


def _gpu_lost(f, x):
    f.gauge("nvml", "infrapulse_gpu_healthy", GPU, 1 - x)


def _nvlink_errors(f, x):
    f.counter("nvml", "infrapulse_gpu_nvlink_errors_total", GPU + ("1", "recovery"), 5, 5 + 0.25 * x)
    f.counter("nvml", "infrapulse_gpu_nvlink_errors_total", GPU + ("1", "crc"), 0, 0.75 * x)
    f.counter("nvml", "infrapulse_gpu_nvlink_errors_total", GPU + ("1", "replay"), 0, 1000)  # not counted
    f.counter("nvml", "infrapulse_gpu_nvlink_errors_total", GPU + ("2", "crc"), 3, 3)  # a clean link


def _kmsg(kind, code="", severity="", address="0000:b3:00.0"):
    def build(f, x):
        f.counter("kmsg", "infrapulse_kmsg_events_total", (kind, address, code, severity), 0, x)
        f.counter("kmsg", "infrapulse_kmsg_events_total", ("link_down", address, "", ""), 0, 7)  # not scored
    return build


def _fabric(f, x):
    # x = 1: registration still in progress; x = 0: completed with success
    state = ("in_progress", "0", "0") if x else ("completed", "0", "7")
    f.gauge("nvml", "infrapulse_gpu_fabric_state", GPU + state, 1)


def _idle(f, x):
    f.gauge("nvml", "infrapulse_gpu_utilization_ratio", GPU, 1 - x)
    f.gauge("serving", "infrapulse_llm_requests_waiting", EP, 3, "llama")


def _latency(family):
    def build(f, x):
        f.gauge("serving", "infrapulse_llm_endpoint_up", EP[:2], 1, "llama")  # successful scrapes
        f.series("serving", family, EP, [empty_histogram(x), latency_histogram(x)], "llama")
    return build


def _queue(f, x):
    f.gauge("serving", "infrapulse_llm_requests_waiting", EP, 2 * x, "llama")
    f.gauge("serving", "infrapulse_llm_requests_running", EP, 2, "llama")


def _kv(f, x):
    f.gauge("serving", "infrapulse_llm_kv_cache_usage_ratio", EP, x, "llama")


def _req_errors(f, x):
    # 1000 finished requests plus 50 aborted ones (client cancellations are not errors):
    # errors / all = x.
    errors = x * 1050
    f.counter("serving", "infrapulse_llm_requests_total", EP + ("success",), 0, 1000 - errors, "llama")
    f.counter("serving", "infrapulse_llm_requests_total", EP + ("abort",), 0, 50, "llama")
    f.counter("serving", "infrapulse_llm_requests_total", EP + ("error",), 0, errors, "llama")


def _preempt(f, x):
    f.counter("serving", "infrapulse_llm_preemptions_total", EP, 0, x * 60, "llama")


def _endpoint_down(f, x):
    f.gauge("serving", "infrapulse_llm_endpoint_up", EP[:2], 1 - x, "llama")


PROBE_KEY = ("local", "intra_node", "all_reduce")


def _probe_latency(f, x):
    f.gauge("probe", "infrapulse_probe_baseline_ratio", PROBE_KEY + ("latency", "8"), 1 + x, "probe")
    f.gauge("probe", "infrapulse_probe_baseline_ratio", PROBE_KEY + ("latency", "16"), 0.9, "probe")  # faster
    f.gauge("probe", "infrapulse_probe_baseline_ratio", PROBE_KEY + ("busbw", "1073741824"), 0.2, "probe")


def _probe_bandwidth(f, x):
    f.gauge("probe", "infrapulse_probe_baseline_ratio", PROBE_KEY + ("busbw", "1073741824"), 1 - x, "probe")
    f.gauge("probe", "infrapulse_probe_baseline_ratio", PROBE_KEY + ("latency", "8"), 3.0, "probe")


def _probe_failed(f, x):
    f.gauge("probe", "infrapulse_probe_last_result", ("nccl_latency", "failed"), x, "probe")
    f.gauge("probe", "infrapulse_probe_last_result", ("nccl_latency", "ok"), 1 - x, "probe")
    f.gauge("probe", "infrapulse_probe_last_result", ("ib_write_lat", "busy"), 1, "probe")  # not a failure


def _probe_wrong(f, x):
    f.gauge("probe", "infrapulse_probe_nccl_wrong_elements",
            PROBE_KEY + ("float", "sum", "1024", "out_of_place"), 256 * x, "probe")
    f.gauge("probe", "infrapulse_probe_nccl_wrong_elements",
            PROBE_KEY + ("float", "sum", "2048", "in_place"), 0, "probe")


def _mesh_loss(f, x):
    f.counter("mesh", "infrapulse_probe_mesh_sent_total", ("gpu-node-07",), 0, 1000, "mesh")
    f.counter("mesh", "infrapulse_probe_mesh_lost_total", ("gpu-node-07",), 0, 1000 * x, "mesh")


def _mesh_rtt(f, x):
    f.gauge("mesh", "infrapulse_probe_mesh_rtt_p99_seconds", ("gpu-node-07",), x, "mesh")


def _uplink(base_builder):
    def build(f, x):
        base_builder(f, x)
        f.gauge("gnmi", "infrapulse_switch_lldp_neighbor_info",
                ("leaf03", "Ethernet12", HOST + ".example.net", "mlx5_0"), 1, "leaf03")
        f.gauge("infiniband", "infrapulse_rdma_port_state", PORT, 4, "mlx5_0")  # this instance is a node too
    return build


def _roce_changed(f, x):
    f.counter("roce_config", "infrapulse_nic_roce_config_changes_total", ("ens1f0np0",), 2, 2 + x,
              "ens1f0np0")


def _roce_drift(f, x):
    f.gauge("roce_config", "infrapulse_nic_roce_config_baseline_drift", ("ens1f0np0",), x, "ens1f0np0")


def _roce_np_off(f, x):
    f.gauge("roce_config", "infrapulse_nic_roce_ecn_enabled", ("ens1f0np0", "roce_np", "3"), 1 - x,
            "ens1f0np0")
    f.gauge("roce_config", "infrapulse_nic_pfc_enabled", ("ens1f0np0", "3"), 1, "ens1f0np0")
    # ECN off on a priority without PFC is not the RDMA priority: not measured
    f.gauge("roce_config", "infrapulse_nic_roce_ecn_enabled", ("ens1f0np0", "roce_np", "0"), 0, "ens1f0np0")
    f.gauge("roce_config", "infrapulse_nic_pfc_enabled", ("ens1f0np0", "0"), 0, "ens1f0np0")


def _roce_unexpected(f, x):
    f.gauge("roce_config", "infrapulse_nic_roce_config_expected_mismatches", ("ens1f0np0",), x, "ens1f0np0")


def _ecn_without_cnp(f, x):
    f.counter("infiniband", "infrapulse_rdma_ecn_marked_packets_total", PORT, 0, 100, "mlx5_0")
    f.counter("infiniband", "infrapulse_rdma_cnp_sent_total", PORT, 0, 90 * (1 - x), "mlx5_0")


# signal, builder, expected target, flag signal (only good/bad), value(x) if not x itself
CASES = [
    ("ecn_marked_ratio", _ecn, "leaf03 Ethernet12 queue 3"),
    ("nic_ecn_marked_ratio", _nic_ecn, "mlx5_0 port 1"),
    ("nic_ecn_marked_ratio", _nic_prio_ecn, "ens1f0np0 priority 3"),
    ("pfc_pause_ratio", _pfc_ratio, "leaf03 Ethernet12 priority 3 rx"),
    ("pfc_pause_ratio", _nic_pfc_ratio, "ens1f0np0 priority 3 rx"),
    ("pfc_pause_ratio", _nic_global_pause, "ens1f0np0 global pause tx"),
    ("pfc_pause_frames_rate", _pfc_frames, "leaf03 Ethernet12 priority 3 rx"),
    ("pfc_pause_frames_rate", _global_pause_frames, "ens1f0np0 global pause rx"),
    ("pfc_storm_events", _storms, "ens1f0np0"),
    ("queue_drop_ratio", _drops, "leaf03 Ethernet12 queue 3"),
    ("phy_error_rate", _fcs, "leaf03 Ethernet12"),
    ("phy_error_rate", _nic_phy, "ens1f0np0"),
    ("phy_error_rate", _ib_symbol, "mlx5_0 port 1"),
    ("switch_port_down", _switch_port_down, "leaf03 Ethernet12"),
    ("link_flaps", _flaps, "leaf03 Ethernet12"),
    ("link_flaps", _link_downed, "mlx5_0 port 1"),
    ("link_flaps", _nic_link_down, "ens1f0np0"),
    ("link_flaps", _nic_carrier, "ens1f0np0"),
    ("link_half_dead", _nic_half_dead, "ens1f0np0"),
    ("link_half_dead", _ib_half_dead, "mlx5_0 port 1"),
    ("link_post_fec_ber", _post_fec_rx_bits, "ens1f0np0"),
    ("link_post_fec_ber", _post_fec_speed, "ens1f0np0"),
    ("link_post_fec_ber", _post_fec_ib, "mlx5_0 port 1"),
    ("link_pre_fec_ber_rise", _pre_fec_rise, "ens1f0np0"),
    ("gnmi_stream_down", _gnmi_down, "leaf03"),
    ("cnp_rate", _cnp, "mlx5_0 port 1"),
    ("retransmission_rate", _retrans, "mlx5_0 port 1"),
    ("out_of_buffer_rate", _oob, "mlx5_0 port 1"),
    ("port_not_active", _port_state, "mlx5_0 port 1"),
    ("rdma_error_ratio", _rdma_errors, "mlx5_0 port 1"),
    ("roce_config_changed", _roce_changed, "ens1f0np0"),
    ("roce_config_drift", _roce_drift, "ens1f0np0"),
    ("roce_ecn_np_off", _roce_np_off, "ens1f0np0 priority 3"),
    ("roce_config_unexpected", _roce_unexpected, "ens1f0np0"),
    ("ecn_marked_without_cnp", _ecn_without_cnp, "mlx5_0 port 1"),
    ("xid_critical", _xid("79"), "GPU 0"),
    ("xid_other", _xid("61"), "GPU 0"),
    ("ecc_uncorrectable", _ecc, "GPU 0"),
    ("row_remap_pending", _flag_gpu("infrapulse_gpu_row_remap_pending"), "GPU 0"),
    ("row_remap_failure", _flag_gpu("infrapulse_gpu_row_remap_failure"), "GPU 0"),
    ("throttle_active", _throttle, "GPU 0"),
    ("gpu_lost", _gpu_lost, "GPU 0"),
    ("nvlink_errors", _nvlink_errors, "GPU 0 NVLink 1"),
    ("fabric_incomplete", _fabric, "GPU 0"),
    ("gpu_idle_while_queued", _idle, "GPU 0"),
    ("kmsg_gpu_fault", _kmsg("gpu_fallen_off_bus"), "PCI 0000:b3:00.0"),
    ("kmsg_nic_fault", _kmsg("mlx5_health_compromised", address="0000:0d:00.0"), "NIC 0000:0d:00.0"),
    ("kmsg_pcie_uncorrected", _kmsg("pcie_aer", "transaction_layer", "uncorrected_fatal"),
     "PCI 0000:b3:00.0"),
    ("kmsg_pcie_corrected", _kmsg("pcie_aer", "data_link_layer", "corrected"), "PCI 0000:b3:00.0"),
    ("ttft_p95", _latency("infrapulse_llm_time_to_first_token_seconds"), "endpoint llama"),
    ("itl_p95", _latency("infrapulse_llm_inter_token_latency_seconds"), "endpoint llama"),
    ("queue_ratio", _queue, "endpoint llama"),
    ("kv_cache_usage", _kv, "endpoint llama"),
    ("request_error_ratio", _req_errors, "endpoint llama"),
    ("preemption_rate", _preempt, "endpoint llama"),
    ("endpoint_down", _endpoint_down, "endpoint llama"),
    ("probe_latency_regression", _probe_latency, "all_reduce 8 B latency"),
    ("probe_bandwidth_regression", _probe_bandwidth, "all_reduce 1 GiB bus bandwidth"),
    ("probe_failed", _probe_failed, "probe nccl_latency"),
    ("probe_wrong_results", _probe_wrong, "all_reduce local"),
    ("mesh_loss", _mesh_loss, "peer gpu-node-07"),
    ("mesh_rtt_p99", _mesh_rtt, "peer gpu-node-07"),
    ("uplink_ecn_marked_ratio", _uplink(_ecn), "leaf03 Ethernet12 queue 3"),
    ("uplink_pfc_pause_ratio", _uplink(_pfc_ratio), "leaf03 Ethernet12 priority 3 rx"),
    ("uplink_pfc_pause_frames_rate", _uplink(_pfc_frames), "leaf03 Ethernet12 priority 3 rx"),
]


def _points(name):
    s = SIGNALS[name]
    if s.unit == "flag":
        return [("good", s.good, 100.0), ("bad", s.bad, 0.0)]
    return [("good", s.good, 100.0), ("bad", s.bad, 0.0), ("midway", (s.good + s.bad) / 2, 50.0)]


PARAMS = [pytest.param(name, build, target, x, expected, id=f"{name}-{target}-{where}")
          for name, build, target in CASES for where, x, expected in _points(name)]


def test_every_signal_has_a_case():
    assert {name for name, _, _ in CASES} == set(SIGNALS)


@pytest.mark.parametrize("name,build,target,x,expected", PARAMS)
def test_signal_value_and_subscore(name, build, target, x, expected):
    feed = Feed()
    build(feed, x)
    service = service_for(feed.store)
    feed.publish(service)
    result = signal(service.report, name)
    assert result.known, f"{name}: no value measured"
    worst = result.worst
    assert worst.measurement.target == target
    assert worst.measurement.value == pytest.approx(x, rel=1e-6, abs=1e-9)
    assert result.score == pytest.approx(expected, abs=1e-6)
