#!/usr/bin/env python3
"""NVML calls and CPU time per full poll of 8 GPUs: infrapulse's poller beside a naive loop.

Both read the same data-driven NVML fake (infrapulse.simulate.nvml_fake): 8 H100 with 18
NVLink links each, every field supported. Both produce the same series.

* infrapulse (`GpuPoller.poll`): identity, link count and MIG layout read once at enumeration;
  per GPU and poll 11 single-value calls plus ONE nvmlDeviceGetFieldValues for ECC, row
  remapping, PCIe replays, energy, memory temperature and every link's NVLink state/tx/rx.
* naive: what a straightforward exporter does, one NVML function call per value, every poll:
  handle, name, UUID, PCI info, the same 11 calls, and one field-value call per field and link
  (nvmlDeviceGetFieldValues with a single entry, as there is no other non-deprecated NVLink
  throughput call).

CPU is time.process_time() over N polls (this process; the fake's own bookkeeping is in both).
A real NVML call is an ioctl into the driver (~5–50 µs each, more on a busy GPU), so on a real
node the call count dominates; `--call-cost-us` adds a busy-wait per call to model that.

Usage: .venv/bin/python bench/nvml_poll.py [--polls 300] [--gpus 8] [--call-cost-us 0]
"""

from __future__ import annotations

import argparse
import time

from infrapulse.simulate.nvml_fake import FakeNvml
from infrapulse.sources.gpu import families as fam
from infrapulse.sources.gpu import nvml_api as api
from infrapulse.sources.gpu.nvml_poll import (
    _LINK_FIELDS,
    _LINK_MAP,
    _SCALAR_FIELDS,
    _SCALAR_MAP,
    KB,
    GpuPoller,
)
from infrapulse.store import Snapshot

H100 = {
    "name": "NVIDIA H100 80GB HBM3", "memory_total": 85520809984, "memory_reserved": 567279616,
    "power_limit_w": 700, "clock_sm_mhz": 1980, "clock_mem_mhz": 2619, "nvlinks": 18,
    "memory_repair": "row_remapping", "mig_slots": 7,
}
GPU = {
    "model": "H100", "utilization": 87, "memory_utilization": 41, "memory_used": 61203283968,
    "power_w": 512.5, "temperature": 64, "memory_temperature": 71, "pstate": 0,
    "ecc": {"corrected_volatile": 3, "uncorrected_volatile": 0, "corrected_aggregate": 12,
            "uncorrected_aggregate": 0},
    "remapped_rows": {"correctable": 1, "uncorrectable": 0, "pending": 0, "failure": 0},
    "retired_pages": {"single_bit_ecc": 0, "double_bit_ecc": 0, "pending": 0},
    "pcie_replays": 2, "pcie_kbps": {"tx": 1900000, "rx": 5200000}, "nvlink_kibps": 11000000,
    "not_supported": [],
}


def make_fake(gpus: int, call_cost_us: float) -> FakeNvml:
    fake = FakeNvml({"driver_version": "570.133.20", "cuda_driver_version": 12080, "models": {"H100": H100},
                     "gpus": [{**GPU, "count": gpus}]}, clock=lambda: 100.0)
    for gpu in fake.gpus:  # "all fields": both memory-repair families answered
        gpu.not_supported.discard("retired_pages")
    if call_cost_us:
        _add_call_cost(fake, call_cost_us / 1e6)
    return fake


def _add_call_cost(fake: FakeNvml, seconds: float) -> None:
    original = fake._enter

    def enter(call):
        if call is not None:
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                pass
        return original(call)

    fake._enter = enter


def naive_poll(nvml: FakeNvml, gpus: int) -> Snapshot:
    """One NVML call per value, nothing cached between polls."""
    snap = Snapshot()
    opt = fam.NO_OPTIONAL
    for index in range(nvml.device_count()):
        h = nvml.handle_by_index(index)
        name, uuid, bus = nvml.name(h), nvml.uuid(h), nvml.pci_bus_id(h)
        g = str(index)
        base = (g, uuid)
        snap.add(fam.INFO, (g, uuid, name, bus, "", "", "", "", ""), 1.0)
        gpu_util, mem_util = nvml.utilization(h)
        snap.add(fam.UTILIZATION, base + opt, gpu_util / 100)
        snap.add(fam.MEMORY_UTILIZATION, base + opt, mem_util / 100)
        mem = nvml.memory_info(h)
        snap.add(fam.MEMORY_TOTAL, base + opt, float(mem.total))
        snap.add(fam.MEMORY_USED, base + opt, float(mem.used))
        snap.add(fam.MEMORY_RESERVED, base + opt, float(mem.reserved))
        snap.add(fam.POWER, base + opt, nvml.power_usage(h) / 1000)
        snap.add(fam.POWER_LIMIT, base + opt, nvml.enforced_power_limit(h) / 1000)
        snap.add(fam.TEMPERATURE, base + ("gpu",) + opt, float(nvml.temperature(h, api.TEMPERATURE_GPU)))
        snap.add(fam.CLOCK, base + ("sm",) + opt, nvml.clock(h, api.CLOCK_SM) * 1e6)
        snap.add(fam.CLOCK, base + ("memory",) + opt, nvml.clock(h, api.CLOCK_MEM) * 1e6)
        fam.add_clock_events(snap, g, uuid, nvml.clocks_event_reasons(h), fam.ALL_CLOCK_EVENT_BITS)
        snap.add(fam.PERFORMANCE_STATE, base + opt, float(nvml.performance_state(h)))
        snap.add(fam.PCIE_THROUGHPUT, base + ("tx",) + opt, nvml.pcie_throughput(h, api.PCIE_TX) * KB)
        snap.add(fam.PCIE_THROUGHPUT, base + ("rx",) + opt, nvml.pcie_throughput(h, api.PCIE_RX) * KB)
        for fid in _SCALAR_FIELDS:
            fv = nvml.field_values(h, [(fid, 0)])[0]
            family, extra, scale = _SCALAR_MAP[fid]
            snap.add(family, base + extra + opt, fv.value * scale)
        links = int(nvml.field_values(h, [(api.FI_NVLINK_LINK_COUNT, 0)])[0].value)
        for link in range(links):
            for fid in _LINK_FIELDS:
                fv = nvml.field_values(h, [(fid, link)])[0]
                family, scale = _LINK_MAP[fid]
                snap.add(family, base + (str(link),) + opt, fv.value * scale)
    return snap


def measure(label: str, poll, nvml: FakeNvml, polls: int) -> tuple[float, float, int]:
    poll()  # warm-up (enumeration for infrapulse)
    nvml.calls.clear()
    cpu0 = time.process_time()
    for _ in range(polls):
        snap = poll()
    cpu = (time.process_time() - cpu0) / polls
    calls = nvml.nvml_calls() / polls
    series = len(snap[0] if isinstance(snap, tuple) else snap)
    print(f"  {label:<11} {calls:8.1f} NVML calls/poll   {cpu * 1e3:8.3f} ms CPU/poll   {series} series")
    return calls, cpu, series


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=300)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--call-cost-us", type=float, default=0.0,
                        help="busy-wait per NVML call, to model the driver ioctl (0: fake cost only)")
    args = parser.parse_args()

    print(f"full poll of {args.gpus} fake H100 (18 NVLink links each, all fields), {args.polls} polls, "
          f"call cost {args.call_cost_us:g} us")
    fake = make_fake(args.gpus, args.call_cost_us)
    poller = GpuPoller(fake)
    ours = measure("infrapulse", lambda: poller.poll(), fake, args.polls)
    fake = make_fake(args.gpus, args.call_cost_us)
    naive = measure("naive", lambda: naive_poll(fake, args.gpus), fake, args.polls)
    print("  (infrapulse's extra series per GPU: healthy, health status, MIG mode)")
    print(f"  ratio naive/infrapulse: {naive[0] / ours[0]:.1f}x NVML calls, "
          f"{naive[1] / ours[1]:.2f}x CPU time")


if __name__ == "__main__":
    main()
