"""Source `infiniband` on real sysfs trees (shared/real/node, see its PROVENANCE.md), value by
value against the output of node_exporter 1.5.0 on the same trees.

Every node_exporter sample has a counterpart here, converted explicitly, or a documented reason
in DEVIATIONS; the test fails on any sample that has neither.
"""

from __future__ import annotations

from helpers import parse_exposition, real, render_store
from infrapulse.sources.base import SourceContext
from infrapulse.sources.nic.infiniband import InfinibandSource
from infrapulse.store import Store

TREES = ("node_exporter", "procfs")

# node_infiniband_<name> -> our family. Units: node_exporter's *_bytes_total are port_*_data x 4,
# ours too, except on hfi1 (DATA_FACTOR); every other sample is the same number in both.
NE_TO_OURS: dict[str, str] = {
    "excessive_buffer_overrun_errors_total": "infrapulse_rdma_port_excessive_buffer_overrun_errors_total",
    "link_downed_total": "infrapulse_rdma_port_link_downed_total",
    "link_error_recovery_total": "infrapulse_rdma_port_link_error_recovery_total",
    "local_link_integrity_errors_total": "infrapulse_rdma_port_local_link_integrity_errors_total",
    "multicast_packets_received_total": "infrapulse_rdma_port_received_multicast_packets_total",
    "multicast_packets_transmitted_total": "infrapulse_rdma_port_transmitted_multicast_packets_total",
    "physical_state_id": "infrapulse_rdma_port_physical_state",
    "port_constraint_errors_received_total": "infrapulse_rdma_port_receive_constraint_errors_total",
    "port_constraint_errors_transmitted_total": "infrapulse_rdma_port_transmit_constraint_errors_total",
    "port_data_received_bytes_total": "infrapulse_rdma_port_received_bytes_total",
    "port_data_transmitted_bytes_total": "infrapulse_rdma_port_transmitted_bytes_total",
    "port_discards_received_total": "infrapulse_rdma_port_receive_discards_total",
    "port_discards_transmitted_total": "infrapulse_rdma_port_transmit_discards_total",
    "port_errors_received_total": "infrapulse_rdma_port_receive_errors_total",
    "port_packets_received_total": "infrapulse_rdma_port_received_packets_total",
    "port_packets_transmitted_total": "infrapulse_rdma_port_transmitted_packets_total",
    "port_receive_remote_physical_errors_total": "infrapulse_rdma_port_receive_remote_physical_errors_total",
    "port_receive_switch_relay_errors_total": "infrapulse_rdma_port_receive_switch_relay_errors_total",
    "port_transmit_wait_total": "infrapulse_rdma_port_transmit_wait_total",
    "rate_bytes_per_second": "infrapulse_rdma_port_rate_bytes_per_second",
    "state_id": "infrapulse_rdma_port_state",
    "symbol_error_total": "infrapulse_rdma_port_symbol_errors_total",
    "unicast_packets_received_total": "infrapulse_rdma_port_received_unicast_packets_total",
    "unicast_packets_transmitted_total": "infrapulse_rdma_port_transmitted_unicast_packets_total",
    "vl15_dropped_total": "infrapulse_rdma_port_vl15_dropped_total",
    # counters_ext/ (mlx4, kernels before 4.5): node_exporter exports them beside counters/ as
    # legacy_*; we read them instead of the 32-bit counters/ files of the same meaning.
    "legacy_data_received_bytes_total": "infrapulse_rdma_port_received_bytes_total",
    "legacy_data_transmitted_bytes_total": "infrapulse_rdma_port_transmitted_bytes_total",
    "legacy_packets_received_total": "infrapulse_rdma_port_received_packets_total",
    "legacy_packets_transmitted_total": "infrapulse_rdma_port_transmitted_packets_total",
    "legacy_unicast_packets_received_total": "infrapulse_rdma_port_received_unicast_packets_total",
    "legacy_unicast_packets_transmitted_total": "infrapulse_rdma_port_transmitted_unicast_packets_total",
    "legacy_multicast_packets_received_total": "infrapulse_rdma_port_received_multicast_packets_total",
    "legacy_multicast_packets_transmitted_total": "infrapulse_rdma_port_transmitted_multicast_packets_total",
}
DATA_METRICS = ("port_data_received_bytes_total", "port_data_transmitted_bytes_total")
# hfi1 (Omni-Path) port_*_data count 8-octet flits (hw/hfi1/mad.c answers PortCountersExtended
# with its flit counters; opa-ff stl_pm.h: "units of flits (8 bytes)"). node_exporter multiplies
# by 4 as for InfiniBand words; we multiply by 8: ours = node_exporter x 8/4.
DATA_FACTOR = {"hfi1_0": 2}

_SUPERSEDED = ("counters/ is the 32-bit PortCounters file, superseded by counters_ext/ (the legacy_ sample, "
               "which matches); the fixture's two files were edited apart by hand")
# (tree, metric, device, port) -> why our value is not node_exporter's.
DEVIATIONS: dict[tuple[str, str, str, str], str] = {
    ("node_exporter", "port_packets_received_total", "mlx4_0", "1"): _SUPERSEDED,
    ("node_exporter", "port_packets_transmitted_total", "mlx4_0", "1"): _SUPERSEDED,
    **{("node_exporter", m, "mlx4_0", "2"): _SUPERSEDED for m in (
        "port_data_received_bytes_total", "port_data_transmitted_bytes_total",
        "unicast_packets_received_total", "unicast_packets_transmitted_total",
        "multicast_packets_received_total", "multicast_packets_transmitted_total")},
}


async def ours(tree: str) -> dict:
    store = Store()
    cfg = InfinibandSource.CONFIG.validate({"sysfs_root": str(real("node", tree, "sys"))},
                                           "sources.infiniband")
    source = InfinibandSource(cfg, SourceContext(store=store, interval=5.0))
    await source.poll_once()
    await source.close()
    return render_store(store)


def node_exporter(tree: str) -> dict:
    return parse_exposition(real("node", tree, "node_exporter-1.5.0.prom").read_text())


async def test_every_node_exporter_sample_has_a_counterpart_or_a_reason():
    matched = deviating = 0
    for tree in TREES:
        mine = await ours(tree)
        for (name, labels), ne_value in node_exporter(tree).items():
            short = name.removeprefix("node_infiniband_")
            lab = dict(labels)
            if short == "info":  # metadata: the same labels on our info family (which adds node_guid
                # and pci_address: "" on every device, these trees keep no `device` link)
                [info] = [dict(k) for n, k in mine
                          if n == "infrapulse_rdma_device_info" and dict(k)["device"] == lab["device"]]
                labels_ours = frozenset({**lab, "node_guid": info["node_guid"], "pci_address": ""}.items())
                key = ("infrapulse_rdma_device_info", labels_ours)
                assert mine[key] == ne_value == 1, (tree, lab)
                matched += 1
                continue
            family = NE_TO_OURS[short]  # a KeyError here: a node_exporter metric with no counterpart
            value = mine[(family, frozenset({"device": lab["device"], "port": lab["port"]}.items()))]
            factor = DATA_FACTOR.get(lab["device"], 1) if short in DATA_METRICS else 1
            reason = DEVIATIONS.get((tree, short, lab["device"], lab["port"]))
            if reason is None:
                assert value == ne_value * factor, (tree, name, lab, value, ne_value)
                matched += 1
            else:  # the documented reason still holds: the values really differ
                assert value != ne_value, (tree, name, lab, "deviation no longer needed")
                deviating += 1
    assert (matched, deviating) == (130, 8)  # all 138 node_exporter samples of the two trees


async def test_counters_ext_is_preferred_over_the_32_bit_counters():
    mine = await ours("node_exporter")
    ne = node_exporter("node_exporter")

    def get(values: dict, name: str, port: str) -> float:
        return values[(name, frozenset({"device": "mlx4_0", "port": port}.items()))]

    for port in ("1", "2"):
        # counters_ext/port_rcv_data_64 4631917 x 4 on both ports (port 2 repeats port 1 in the fixture)
        assert get(mine, "infrapulse_rdma_port_received_bytes_total", port) == 4631917 * 4 == get(
            ne, "node_infiniband_legacy_data_received_bytes_total", port)
        assert get(mine, "infrapulse_rdma_port_transmitted_bytes_total", port) == 3733440 * 4
        assert get(mine, "infrapulse_rdma_port_received_packets_total", port) == 0  # port_rcv_packets_64
        assert get(mine, "infrapulse_rdma_port_received_unicast_packets_total", port) == 61148
    # port 1 counters/port_xmit_wait stays a PMA counter: 32-bit, saturated
    assert get(mine, "infrapulse_rdma_port_transmit_wait_total", "1") == 2**32 - 1
    assert get(mine, "infrapulse_rdma_port_saturated_counters", "1") == 1
    # each counters_ext file is read once and replaces its counters/ twin: no double series
    assert get(mine, "infrapulse_rdma_port_received_bytes_total", "2") != get(
        ne, "node_infiniband_port_data_received_bytes_total", "2")


async def test_hfi1_data_counts_flits_of_8_octets():
    mine = await ours("procfs")
    key = frozenset({"device": "hfi1_0", "port": "1"}.items())
    hfi1 = real("node", "procfs", "sys/class/infiniband/hfi1_0/ports/1/counters")
    rcv, xmit = (int((hfi1 / f).read_text()) for f in ("port_rcv_data", "port_xmit_data"))
    assert mine[("infrapulse_rdma_port_received_bytes_total", key)] == rcv * 8
    assert mine[("infrapulse_rdma_port_transmitted_bytes_total", key)] == xmit * 8
    mlx5 = frozenset({"device": "mlx5_0", "port": "1"}.items())
    mlx5_rcv = int(real("node", "procfs", "sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data")
                   .read_text())
    assert mine[("infrapulse_rdma_port_received_bytes_total", mlx5)] == mlx5_rcv * 4  # InfiniBand words


async def test_i40iw_no_pma_is_partial_and_mlx5_hw_counters_are_exact():
    mine = await ours("node_exporter")
    status = mine[("infrapulse_source_status_info", frozenset(
        {"source": "infiniband", "target": "i40iw0", "reason": "partial"}.items()))]
    assert status == 1
    assert not [k for k in mine if k[0] == "infrapulse_rdma_port_received_bytes_total" and
                dict(k[1])["device"] == "i40iw0"]  # N/A (no PMA): no made-up zero
    procfs = await ours("procfs")
    hw = real("node", "procfs", "sys/class/infiniband/mlx5_0/ports/1/hw_counters")
    port = {"device": "mlx5_0", "port": "1"}
    expected = {f.name: int(f.read_text()) for f in hw.iterdir() if f.name != "lifespan"}
    assert len(expected) == 24
    got = {}
    for (name, labels), v in procfs.items():
        lab = dict(labels)
        hw_families = ("infrapulse_rdma_hw_", "infrapulse_rdma_retrans", "infrapulse_rdma_out_of_buffer")
        if lab.get("device") != "mlx5_0" or not name.startswith(hw_families):
            continue
        got[lab.get("counter") or lab.get("reason") or "out_of_buffer"] = v
        assert lab["port"] == port["port"]
    assert got == expected


def test_the_bulk_read_files_the_real_trees_as_the_per_file_read_does():
    """Every device of both real trees (mlx4 counters_ext, hfi1 flits, i40iw N/A, mlx5), read
    through the bulk path and the per-file path: the same series and errors."""
    from infrapulse.sources.nic.infiniband import InfinibandReader
    from test_infiniband import per_file_and_bulk

    for tree in TREES:
        reader = InfinibandReader(real("node", tree, "sys"))
        reader.collect()
        pairs = per_file_and_bulk(reader)
        assert len(pairs) >= 2, tree
        for per_file, bulk in pairs:
            assert bulk == per_file, tree
