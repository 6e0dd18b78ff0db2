"""Kernel-log signals (source `kmsg`): what the kernel says about a device that no other source
can, each the increase of `infrapulse_kmsg_events_total` per PCI function over the event window
(the window of the XID signals; a device's first event counts: the family is sparse).

* `kmsg_gpu_fault` (critical): a GPU fallen off the bus, a critical-class XID (xid.py, the one
  table) that NVML/DCGM did not count, a `Fatal` NVSwitch SXid.
* `kmsg_nic_fault` (critical): mlx5 firmware health — the health counter missed (the device is
  compromised) or a firmware health issue / assert of severity error or worse.
* `kmsg_pcie_uncorrected` (critical): PCIe AER uncorrected errors (fatal or non-fatal).
* `kmsg_pcie_corrected`: PCIe AER corrected errors, a trend: a few are normal (link training),
  a steady stream is a link degrading before it fails.

An XID is scored once: NVML's watcher (`xid_critical`) counts the same event the kernel logs, so
for a GPU that infrapulse_gpu_info maps (pci_bus_id), the kernel's count of an XID code is
reduced by NVML's increase of that code on that GPU over the same window; only what NVML did not
see (no NVML here, a watcher that missed it) is left to score.

Not scored here: kmsg link events (link_up / link_down / link_init, module plugged/unplugged) —
a link event counts with the NIC's own carrier and state counters (the link signals), not twice;
command and TX timeouts, CQE and bnxt errors are counted and graphed, not scored (yet).

Devices are named from the PCI address: a GPU through infrapulse_gpu_info's pci_bus_id (NVML's
00000000:B3:00.0 is the kernel's 0000:b3:00.0), labelled `gpu`; an RDMA NIC through
infrapulse_rdma_device_info's pci_address (its sysfs `device` link), named by its RDMA device
(`mlx5_0`) and labelled `device` and, where infrapulse_rdma_port_info names one, `interface` (its
netdev), so the blast radius (health/blast.py) names that GPU's or that NIC's workloads only.
Every target keeps `pci_address`. A function neither maps (a bridge, a NIC without an RDMA
device, no infiniband source here) is named by its PCI address, and its blast radius is the
node's RDMA NICs.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import xid
from ...pci import sysfs_address
from .base import COUNT, Context, Measurement, Signal, rdma_ports

EVENTS = "infrapulse_kmsg_events_total"
RECORDS = "infrapulse_kmsg_records_total"
GPU_INFO = "infrapulse_gpu_info"
NVML_XIDS = "infrapulse_gpu_xid_errors_total"
RDMA_DEVICE = "infrapulse_rdma_device_info"
RDMA_PORT = "infrapulse_rdma_port_info"
NIC_FAMILIES = (RDMA_DEVICE, RDMA_PORT)

# mlx5 health severities (mlx5_health_severity) below "error": reported, not a broken device.
MLX5_MINOR = frozenset({"warning", "notice", "info", "debug"})
UNCORRECTED = frozenset({"uncorrected_nonfatal", "uncorrected_fatal"})

EventKey = tuple[str, str, str, str]  # (kind, pci_address, code, severity)


def gpus_by_address(ctx: Context) -> dict[str, str]:
    """Kernel PCI address -> GPU index, from infrapulse_gpu_info."""
    out = {}
    for s in ctx.readings.series(GPU_INFO):
        address = sysfs_address(s.labels.get("pci_bus_id", ""))
        if address and s.labels.get("gpu", ""):
            out[address] = s.labels["gpu"]
    return out


def nics_by_address(ctx: Context) -> dict[str, tuple[str, str]]:
    """Kernel PCI address -> (RDMA device, its netdev or ""), from infrapulse_rdma_device_info's
    pci_address and infrapulse_rdma_port_info's netdev (the lowest port that names one). Two RDMA
    devices on one function (a soft-RoCE device over a NIC's netdev): the first by name."""
    netdevs: dict[str, str] = {}
    for (device, _port), port in sorted(rdma_ports(ctx).items()):
        if port.netdev:
            netdevs.setdefault(device, port.netdev)
    out: dict[str, tuple[str, str]] = {}
    for device, address in sorted((s.labels.get("device", ""), s.labels.get("pci_address", ""))
                                  for s in ctx.readings.series(RDMA_DEVICE)):
        if device and address:
            out.setdefault(address, (device, netdevs.get(device, "")))
    return out


def event_increases(ctx: Context) -> dict[EventKey, float]:
    """Increase of each kernel-log event series over the event window (summed over instances)."""
    out: dict[EventKey, float] = {}
    for s in ctx.readings.series(EVENTS):
        rate = ctx.readings.increase(s, "event_window")
        if rate is None:
            continue
        key = (s.labels.get("kind", ""), s.labels.get("pci_address", ""), s.labels.get("code", ""),
               s.labels.get("severity", ""))
        out[key] = out.get(key, 0.0) + rate.increase
    return out


def _nvml_xids(ctx: Context) -> dict[tuple[str, str], float]:
    """(gpu, xid) -> NVML/DCGM's increase over the event window."""
    out: dict[tuple[str, str], float] = {}
    for s in ctx.readings.series(NVML_XIDS):
        rate = ctx.readings.increase(s, "event_window")
        if rate is not None:
            key = (s.labels.get("gpu", ""), s.labels.get("xid", ""))
            out[key] = out.get(key, 0.0) + rate.increase
    return out


def _reading(ctx: Context) -> bool:
    """The kmsg source publishes here (a quiet log is a measurement of 0, not unknown)."""
    return any(True for _ in ctx.readings.series(RECORDS))


class _Tally:
    """Per device: the count, and the notes naming what was counted."""

    def __init__(self) -> None:
        self.counts: dict[str, float] = {}
        self.notes: dict[str, dict[str, float]] = {}

    def add(self, address: str, n: float, note: str) -> None:
        self.counts[address] = self.counts.get(address, 0.0) + n
        if n > 0:
            per = self.notes.setdefault(address, {})
            per[note] = per.get(note, 0.0) + n

    def note(self, address: str) -> str:
        return ", ".join(f"{what} x{n:g}" if n != 1 else what
                         for what, n in sorted(self.notes.get(address, {}).items()))


def _measurements(ctx: Context, tally: _Tally, noun: str, gpus: dict[str, str] | None = None,
                  zero_for_gpus: bool = False, zero_for_nics: bool = False) -> list[Measurement]:
    gpus = gpus if gpus is not None else gpus_by_address(ctx)
    nics = nics_by_address(ctx)
    counts = dict(tally.counts)
    if zero_for_gpus:
        for address in gpus:
            counts.setdefault(address, 0.0)
    if zero_for_nics:
        for address in nics:
            counts.setdefault(address, 0.0)
    out = []
    for address, n in sorted(counts.items()):
        gpu = gpus.get(address)
        nic = nics.get(address)
        if gpu is not None:
            out.append(Measurement(f"GPU {gpu}", n, tally.note(address),
                                   labels={"gpu": gpu, "pci_address": address}))
        elif nic is not None:
            device, netdev = nic
            labels = {"device": device, "interface": netdev} if netdev else {"device": device}
            out.append(Measurement(device, n, tally.note(address), labels={**labels, "pci_address": address}))
        else:
            out.append(Measurement(f"{noun} {address}" if address else f"{noun} (no PCI address)", n,
                                   tally.note(address), labels={"pci_address": address}))
    if not out and _reading(ctx):
        out.append(Measurement("kernel log", 0.0, "none in the window"))
    return out


def measure_gpu_fault(ctx: Context) -> list[Measurement]:
    gpus = gpus_by_address(ctx)
    nvml = _nvml_xids(ctx)
    tally = _Tally()
    for (kind, address, code, severity), n in event_increases(ctx).items():
        if kind == "gpu_fallen_off_bus":
            tally.add(address, n, "fallen off the bus")
        elif kind == "xid" and code.isdigit() and xid.xid_class(int(code)) == xid.CRITICAL:
            seen = nvml.get((gpus.get(address, ""), code), 0.0) if address in gpus else 0.0
            tally.add(address, max(n - seen, 0.0), f"XID {code}")
        elif kind == "sxid" and severity == "fatal":
            tally.add(address, n, f"fatal SXid {code}")
    return _measurements(ctx, tally, "PCI", gpus, zero_for_gpus=True)


def _kinds(wanted: Callable[[str, str], str | None], noun: str, zero_for_gpus: bool = False,
           zero_for_nics: bool = False) -> Callable[[Context], list[Measurement]]:
    def measure(ctx: Context) -> list[Measurement]:
        tally = _Tally()
        for (kind, address, code, severity), n in event_increases(ctx).items():
            note = wanted(kind, f"{code} {severity}".strip() if kind == "pcie_aer" else severity)
            if note is not None:
                tally.add(address, n, note)
        return _measurements(ctx, tally, noun, zero_for_gpus=zero_for_gpus, zero_for_nics=zero_for_nics)
    return measure


def _nic_fault(kind: str, severity: str) -> str | None:
    if kind == "mlx5_health_compromised":
        return "health compromised"
    if kind == "mlx5_fw_error" and severity not in MLX5_MINOR:
        return f"firmware health issue ({severity or 'unknown severity'})"
    return None


def _aer(severities: frozenset[str]) -> Callable[[str, str], str | None]:
    def wanted(kind: str, detail: str) -> str | None:
        if kind != "pcie_aer":
            return None
        code, _, severity = detail.rpartition(" ")
        return f"{code.replace('_', ' ')} ({severity.replace('_', ' ')})" if severity in severities else None
    return wanted


measure_nic_fault = _kinds(_nic_fault, "NIC", zero_for_nics=True)
measure_pcie_uncorrected = _kinds(_aer(UNCORRECTED), "PCI", zero_for_gpus=True)
measure_pcie_corrected = _kinds(_aer(frozenset({"corrected"})), "PCI", zero_for_gpus=True)

FAMILIES = (EVENTS, RECORDS)

SIGNALS: list[Signal] = [
    Signal(
        name="kmsg_gpu_fault",
        component="gpu",
        title="GPU / NVSwitch fault in the kernel log",
        formula=("increase(kmsg_events{kind=gpu_fallen_off_bus}) + increase(kmsg_events{kind=xid, critical "
                 "class}) less NVML's increase of that XID on that GPU + increase(kmsg_events{kind=sxid, "
                 "severity=fatal}), per PCI function over the event window"),
        unit=COUNT,
        window="event_window",
        good=0.0,
        bad=1.0,
        weight=4.0,
        phrase="{value} GPU/NVSwitch fault(s) in the kernel log",
        hint=("drain the node; a GPU off the bus or a fatal SXid needs a GPU reset or a reboot (check the "
              "slot, power and NVSwitch links if it repeats); look the XID up in NVIDIA's Xid catalog"),
        measure=measure_gpu_fault,
        families=(*FAMILIES, GPU_INFO, NVML_XIDS, *NIC_FAMILIES),
        sources=("kmsg",),
        counters=(EVENTS, NVML_XIDS),
        critical=True,
    ),
    Signal(
        name="kmsg_nic_fault",
        component="rdma",
        title="mlx5 firmware health fault in the kernel log",
        formula=("increase(kmsg_events{kind=mlx5_health_compromised}) + increase(kmsg_events{kind="
                 "mlx5_fw_error, severity error or worse}) per PCI function over the event window"),
        unit=COUNT,
        window="event_window",
        good=0.0,
        bad=1.0,
        weight=4.0,
        phrase="{value} mlx5 firmware health fault(s) in the kernel log",
        hint=("the NIC's firmware stopped answering or asserted: drain the node, collect `devlink health` "
              "and the fw dump, reset the device (devlink reload) or reboot; RMA it if it repeats"),
        measure=measure_nic_fault,
        families=(*FAMILIES, *NIC_FAMILIES),
        sources=("kmsg",),
        counters=(EVENTS,),
        critical=True,
    ),
    Signal(
        name="kmsg_pcie_uncorrected",
        component="gpu",
        title="PCIe AER uncorrected errors",
        formula=("increase(kmsg_events{kind=pcie_aer, severity=uncorrected_nonfatal|uncorrected_fatal}) "
                 "per PCI function over the event window"),
        unit=COUNT,
        window="event_window",
        good=0.0,
        bad=1.0,
        weight=3.0,
        phrase="{value} uncorrected PCIe error(s)",
        hint=("the device behind this PCIe link may have lost data or been reset: drain the node; reseat "
              "the card or replace the riser/cable, and check the slot's power if it repeats"),
        measure=measure_pcie_uncorrected,
        families=(*FAMILIES, GPU_INFO, *NIC_FAMILIES),
        sources=("kmsg",),
        counters=(EVENTS,),
        critical=True,
    ),
    Signal(
        name="kmsg_pcie_corrected",
        component="gpu",
        title="PCIe AER corrected errors",
        formula=("increase(kmsg_events{kind=pcie_aer, severity=corrected}) per PCI function over the event "
                 "window"),
        unit=COUNT,
        window="event_window",
        good=2.0,
        bad=20.0,
        weight=1.0,
        phrase="{value} corrected PCIe error(s)",
        hint=("a PCIe link retrying (bad TLPs/DLLPs, receiver errors): a steady stream slows the device "
              "and often precedes an uncorrected error; reseat the card, check the riser and the link "
              "speed/width"),
        measure=measure_pcie_corrected,
        families=(*FAMILIES, GPU_INFO, *NIC_FAMILIES),
        sources=("kmsg",),
        counters=(EVENTS,),
    ),
]
