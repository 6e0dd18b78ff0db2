"""The kernel-log health signals (health/signals/kmsg.py), driven by the real captures in
../shared/real/kmsg (read in place) through the kmsg source — reader, classifier, counters — into
the health readings: two passes a window apart, a quiet log first, then the capture. Values and
statuses asserted, and the device named (GPU index through infrapulse_gpu_info, RDMA device
through infrapulse_rdma_device_info{pci_address}, else its PCI address) with its blast radius."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from health_fixtures import Feed, service_for, signal
from helpers import real
from infrapulse import config as config_mod
from infrapulse.health.signals import SIGNALS
from infrapulse.health.signals.kmsg import sysfs_address
from infrapulse.sources.base import SourceContext
from infrapulse.sources.kmsg.source import KmsgSource
from infrapulse.store import Snapshot

KMSG_SIGNALS = ("kmsg_gpu_fault", "kmsg_nic_fault", "kmsg_pcie_uncorrected", "kmsg_pcie_corrected")
# infrapulse_gpu_info labels: gpu, uuid, name, pci_bus_id, driver_version, cuda_version
GPU3_B3 = ("3", "GPU-3333", "NVIDIA H100 80GB HBM3", "00000000:B3:00.0", "570.158.01", "12.8")
GPU5_91 = ("5", "GPU-5555", "NVIDIA H100 80GB HBM3", "00000000:91:00.0", "535.129.03", "12.2")


def _kmsg_passes(tmp_path: Path, text: str) -> list[Snapshot]:
    """The kmsg source's snapshots: a pass over a quiet log, then one after `text` arrived."""
    log = tmp_path / "kmsg.log"
    log.write_text("")
    section = {"enabled": True, "path": str(log), "boot_id_path": ""}
    cfg = config_mod.load_text(yaml.safe_dump({"sources": {"kmsg": section}}), "<test>")
    source = KmsgSource(cfg.sources["kmsg"], SourceContext(store=None, interval=5.0))  # type: ignore[arg-type]
    quiet = source.collect_once().snapshot
    with log.open("a") as f:
        f.write(text)
    after = source.collect_once().snapshot
    source.reader.close()
    assert quiet is not None and after is not None
    return [quiet, after]


def _feed(snaps: list[Snapshot], gpus: tuple[tuple[str, ...], ...] = (), extra=None) -> Feed:
    feed = Feed()
    for step, snap in enumerate(snaps):
        for family, series in snap.series.items():
            for labels, value in series.items():
                values: list = [None] * len(snaps)
                values[step] = value
                feed.series("kmsg", family, labels, values)
    for gpu in gpus:
        feed.gauge("nvml", "infrapulse_gpu_info", gpu, 1)
    if extra:
        extra(feed)
    return feed


def _report(tmp_path: Path, text: str, gpus=(), extra=None):
    feed = _feed(_kmsg_passes(tmp_path, text), gpus, extra)
    service = service_for(feed.store)
    feed.publish(service)
    return service.report


def _values(report, name: str) -> dict[str, tuple[float, str]]:
    return {t.measurement.target: (t.measurement.value, t.measurement.note)
            for t in signal(report, name).targets}


def _reasons(report) -> list[tuple[str, str, str, str]]:
    return [(r.status, r.rule, r.signal, r.target) for r in report.status_reasons if r.signal]


def test_nvml_and_kernel_pci_addresses_are_one_form() -> None:
    assert sysfs_address("00000000:B3:00.0") == "0000:b3:00.0"
    assert sysfs_address("0000:9B:00") == "0000:9b:00.0"
    assert sysfs_address("not a bus id") == ""
    assert {s.name for s in SIGNALS.values() if s.sources == ("kmsg",)} == set(KMSG_SIGNALS)
    assert [SIGNALS[n].critical for n in KMSG_SIGNALS] == [True, True, True, False]


def test_a_gpu_fallen_off_the_bus_is_critical_and_names_the_gpu(tmp_path: Path) -> None:
    text = real("kmsg", "nvrm-fallen-off-bus-570-nvsentinel-issue155.txt").read_text()
    report = _report(tmp_path, text, gpus=(GPU3_B3,))
    assert _values(report, "kmsg_gpu_fault") == {"GPU 3": (1.0, "fallen off the bus")}
    worst = signal(report, "kmsg_gpu_fault").worst
    assert worst.score == 0.0 and worst.measurement.labels == {"gpu": "3", "pci_address": "0000:b3:00.0"}
    assert report.status == "critical"
    assert ("critical", "critical_signal", "kmsg_gpu_fault", "GPU 3") in _reasons(report)
    reason = next(r for r in report.status_reasons if r.signal == "kmsg_gpu_fault")
    assert reason.labels["gpu"] == "3"  # the blast radius (health/blast.py) follows `gpu`
    # Nothing else in the capture: the other kernel-log signals are known and at 0.
    assert _values(report, "kmsg_pcie_uncorrected") == {"GPU 3": (0.0, "")}
    assert _values(report, "kmsg_nic_fault") == {"kernel log": (0.0, "none in the window")}


def test_without_gpu_info_the_pci_address_names_the_device(tmp_path: Path) -> None:
    text = real("kmsg", "nvrm-fallen-off-bus-legacy-bumblebee-issue554.txt").read_text()
    report = _report(tmp_path, text)
    assert _values(report, "kmsg_gpu_fault") == {"PCI 0000:01:00.0": (2.0, "fallen off the bus x2")}
    assert report.status == "critical"


def test_an_mlx5_firmware_fault_is_critical_per_pci_function(tmp_path: Path) -> None:
    text = real("kmsg", "mlx5-health-fw-assert-cx6dx-qemu-devel-2025.txt").read_text()
    report = _report(tmp_path, text)
    values = _values(report, "kmsg_nic_fault")
    assert values == {
        "NIC 0000:0d:00.0": (2.0, "firmware health issue (error), health compromised"),
        "NIC 0000:0d:00.1": (2.0, "firmware health issue (error), health compromised"),
        **{f"NIC 0000:0d:00.{fn}": (1.0, "health compromised") for fn in range(2, 6)}}
    worst = signal(report, "kmsg_nic_fault").worst
    assert worst.measurement.target == "NIC 0000:0d:00.0" and worst.score == 0.0
    assert worst.measurement.labels == {"pci_address": "0000:0d:00.0"}
    assert report.status == "critical" and report.component_status["rdma"] == "critical"
    reason = next(r for r in report.status_reasons if r.signal == "kmsg_nic_fault")
    assert (reason.status, reason.target, reason.targets) == ("critical", "NIC 0000:0d:00.0", 6)


def test_an_xid_nvml_counted_is_not_scored_twice(tmp_path: Path) -> None:
    text = real("kmsg", "nvrm-xid79-sxid20034-gpud-readme.txt").read_text()
    # No NVML XID counter: the kernel's XID 79 and its fallen-off-the-bus line both count.
    (tmp_path / "a").mkdir()
    alone = _report(tmp_path / "a", text, gpus=(GPU5_91,))
    expected_switches = {"PCI 0000:05:00.0": (2.0, "fatal SXid 20034 x2"),
                         "PCI 0000:06:00.0": (1.0, "fatal SXid 20034"),
                         "PCI 0000:07:00.0": (1.0, "fatal SXid 20034")}
    assert _values(alone, "kmsg_gpu_fault") == {"GPU 5": (2.0, "XID 79, fallen off the bus"),
                                                **expected_switches}
    # NVML counted the same XID 79 on GPU 5 in the window: xid_critical scores it, kmsg does not.
    (tmp_path / "b").mkdir()
    both = _report(tmp_path / "b", text, gpus=(GPU5_91,), extra=lambda feed: feed.series(
        "nvml", "infrapulse_gpu_xid_errors_total", ("5", "GPU-5555", "79"), [None, 1.0]))
    assert _values(both, "xid_critical") == {"GPU 5": (1.0, "XID 79")}
    assert _values(both, "kmsg_gpu_fault") == {"GPU 5": (1.0, "fallen off the bus"), **expected_switches}
    assert both.status == "critical"


def test_aer_corrected_errors_are_a_trend_degraded_only_past_bad(tmp_path: Path) -> None:
    sig = SIGNALS["kmsg_pcie_corrected"]
    assert (sig.good, sig.bad, sig.critical, sig.window) == (2.0, 20.0, False, "event_window")
    text = real("kmsg", "aer-corrected-dll-timeout-legacy-coreboot-issue2.txt").read_text()
    (tmp_path / "once").mkdir()
    once = _report(tmp_path / "once", text)
    assert _values(once, "kmsg_pcie_corrected") == {
        "PCI 0000:00:1c.1": (4.0, "data link layer (corrected) x4")}
    # Between good (2) and bad (20): 100 - 100 * (4 - 2) / 18 = 88.9, and no status reason.
    assert signal(once, "kmsg_pcie_corrected").worst.score == pytest.approx(88.89, abs=0.01)
    assert "kmsg_pcie_corrected" not in {r.signal for r in once.status_reasons}
    assert _values(once, "kmsg_pcie_uncorrected") == {"kernel log": (0.0, "none in the window")}
    # The same link logging five times as often in the window: 20, at bad -> degraded.
    (tmp_path / "often").mkdir()
    often = _report(tmp_path / "often", text * 5)
    assert _values(often, "kmsg_pcie_corrected") == {
        "PCI 0000:00:1c.1": (20.0, "data link layer (corrected) x20")}
    assert signal(often, "kmsg_pcie_corrected").worst.score == 0.0
    assert _reasons(often) == [("degraded", "signal_past_bad", "kmsg_pcie_corrected", "PCI 0000:00:1c.1")]
    assert often.status == "degraded"


def test_an_uncorrected_aer_error_is_critical(tmp_path: Path) -> None:
    # The 6.x uncorrected wording (no real capture holds one), as a dmesg line.
    text = ("[ 9000.000001] pcieport 0000:00:03.1: PCIe Bus Error: severity=Uncorrected (Fatal), "
            "type=Transaction Layer, (Requester ID)\n")
    report = _report(tmp_path, text)
    assert _values(report, "kmsg_pcie_uncorrected") == {
        "PCI 0000:00:03.1": (1.0, "transaction layer (uncorrected fatal)")}
    assert _values(report, "kmsg_pcie_corrected") == {"kernel log": (0.0, "none in the window")}
    assert report.status == "critical"


def test_kernel_link_events_change_no_score(tmp_path: Path) -> None:
    """A link event counts with the NIC's own carrier counters (the link signals), not twice."""
    up = real("kmsg", "mlx5-ib-link-init-active-journal-gpud-pr1209.txt").read_text()
    plugged = real("kmsg", "mlx5-port-module-cable-plugged-linkup-blog.txt").read_text()
    # A link-down line of the same real shape (no capture holds one).
    down = up.replace("Port: 1 Link ACTIVE", "Port: 1 Link DOWN")
    assert "Link DOWN" in down
    (tmp_path / "quiet").mkdir()
    quiet = _report(tmp_path / "quiet", "", gpus=(GPU3_B3,))
    (tmp_path / "links").mkdir()
    links = _report(tmp_path / "links", up + down + plugged, gpus=(GPU3_B3,))
    events = set(_kmsg_passes(tmp_path, up + down + plugged)[1].series["infrapulse_kmsg_events_total"])
    assert {k[0] for k in events} == {"link_up", "link_down", "link_init", "module_plugged"}
    for name in KMSG_SIGNALS:
        assert {t: v for t, (v, _) in _values(links, name).items()} == \
            {t: v for t, (v, _) in _values(quiet, name).items()}, name
        assert all(v == 0.0 for v, _ in _values(links, name).values())
    assert links.score == quiet.score and links.status == quiet.status
    assert not {r.signal for r in links.status_reasons} & set(KMSG_SIGNALS)


# infrapulse_rdma_device_info: device, hca_type, board_id, firmware_version, node_guid, pci_address;
# infrapulse_rdma_port_info: device, port, link_layer, netdev. The capture's ConnectX-6 Dx: two PFs
# (0d:00.0, 0d:00.1) with netdevs, one more function with an RDMA device and no netdev, 0d:00.3-5
# without an RDMA device here; mlx5_3 on another card logs nothing.
RDMA_DEVICES = (("mlx5_0", "0000:0d:00.0"), ("mlx5_1", "0000:0d:00.1"), ("mlx5_2", "0000:0d:00.2"),
                ("mlx5_3", "0000:8a:00.0"))
RDMA_PORTS = (("mlx5_0", "1", "Ethernet", "ens1f0np0"), ("mlx5_1", "1", "Ethernet", "ens1f1np1"),
              ("mlx5_3", "1", "Ethernet", "ens3f0np0"))
# infrapulse_workload_nic_info: device, interface, kind, workload, then the detail labels (pod,
# namespace, container, slurm_job_id, slurm_step, slurm_user, endpoint).
NIC_WORKLOADS = (("mlx5_0", "ens1f0np0", "slurm_job", "4242", "", "", "", "4242", "0", "", ""),
                 ("mlx5_0", "ens1f0np0", "endpoint", "sglang-qwen", "", "", "", "", "", "", "sglang-qwen"),
                 ("mlx5_1", "ens1f1np1", "endpoint", "vllm-llama-70b", "", "", "", "", "", "",
                  "vllm-llama-70b"),
                 ("mlx5_3", "ens3f0np0", "slurm_job", "7777", "", "", "", "7777", "0", "", ""))


def _nics(feed: Feed) -> None:
    for device, address in RDMA_DEVICES:
        feed.gauge("infiniband", "infrapulse_rdma_device_info",
                   (device, "MT4125", "MT_0000000359", "22.44.1036", "", address), 1, target=device)
    for port in RDMA_PORTS:
        feed.gauge("infiniband", "infrapulse_rdma_port_info", port, 1, target=port[0])
    for row in NIC_WORKLOADS:
        feed.gauge("workload", "infrapulse_workload_nic_info", row, 1, target="workload")


def test_an_mlx5_fault_names_the_rdma_device_and_only_its_workloads(tmp_path: Path) -> None:
    text = real("kmsg", "mlx5-health-fw-assert-cx6dx-qemu-devel-2025.txt").read_text()
    report = _report(tmp_path, text, extra=_nics)
    fault = "firmware health issue (error), health compromised"
    assert _values(report, "kmsg_nic_fault") == {
        "mlx5_0": (2.0, fault), "mlx5_1": (2.0, fault), "mlx5_2": (1.0, "health compromised"),
        **{f"NIC 0000:0d:00.{fn}": (1.0, "health compromised") for fn in range(3, 6)},
        "mlx5_3": (0.0, "")}  # a known NIC that logged nothing is measured, at 0
    labels = {t.measurement.target: t.measurement.labels for t in signal(report, "kmsg_nic_fault").targets}
    assert labels["mlx5_0"] == {"device": "mlx5_0", "interface": "ens1f0np0", "pci_address": "0000:0d:00.0"}
    assert labels["mlx5_2"] == {"device": "mlx5_2", "pci_address": "0000:0d:00.2"}  # no netdev known
    assert labels["NIC 0000:0d:00.3"] == {"pci_address": "0000:0d:00.3"}
    assert report.status == "critical"
    reason = next(r for r in report.status_reasons if r.signal == "kmsg_nic_fault")
    assert (reason.status, reason.target, reason.targets) == ("critical", "mlx5_0", 6)
    # The blast radius is mlx5_0's workloads, not every NIC's (mlx5_1's endpoint, mlx5_3's job).
    assert reason.affected is not None and reason.affected.state == "known"
    assert [(w.kind, w.name) for w in reason.affected.workloads] == [("endpoint", "sglang-qwen"),
                                                                    ("slurm_job", "4242")]
    assert reason.affected.via == "RDMA device mlx5_0"
    assert [w.name for w in report.workloads.affected(labels["mlx5_1"]).workloads] == ["vllm-llama-70b"]
    # An unmapped function still falls back to every RDMA NIC of the node.
    unmapped = report.workloads.affected(labels["NIC 0000:0d:00.3"])
    assert {w.name for w in unmapped.workloads} == {"4242", "sglang-qwen", "vllm-llama-70b", "7777"}
