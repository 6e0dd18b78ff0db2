"""Shared pieces of the gNMI tests: a source over a real store, waiting, expected samples."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from infrapulse.simulate import gnmi_sonic
from infrapulse.simulate.gnmi_port import PRIORITIES
from infrapulse.simulate.gnmi_target import GnmiTarget, SimSwitch
from infrapulse.sources.base import SourceContext
from infrapulse.sources.gnmi.config import CONFIG
from infrapulse.sources.gnmi.families import STATUS_FAMILIES
from infrapulse.sources.gnmi.source import GnmiSource
from infrapulse.store import Store

STATUS = {f.name for f in STATUS_FAMILIES}


async def wait_for(predicate: Callable[[], bool], timeout: float = 15.0, what: str = "condition") -> None:
    """Poll until predicate() is true; a bounded wait, not a timing assertion."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def running_source(section: dict, hostname: str = "fabric-0"):
    """Run a GnmiSource over a fresh Store (validated config, like the daemon does)."""
    config = CONFIG.validate(section, "sources.gnmi")
    store = Store()
    source = GnmiSource(config, SourceContext(store=store, interval=5.0, hostname=hostname))
    task = asyncio.create_task(source.run())
    try:
        yield source, store
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await source.close()


@contextlib.asynccontextmanager
async def serving(*targets: GnmiTarget):
    started = []
    try:
        for t in targets:
            await t.start()
            started.append(t)
        yield targets
    finally:
        for t in started:
            await t.stop()


def target_entry(target: GnmiTarget, **extra) -> dict:
    return {"name": target.switch.name, "address": target.address, "profile": target.switch.profile, **extra}


def data_series(store: Store, switch: str) -> dict[tuple[str, tuple], float]:
    snap = store.snapshot("gnmi", switch)
    out = {}
    if snap is None:
        return out
    for family, series in snap.series.items():
        if family in STATUS:
            continue
        for labels, value in series.items():
            out[(family, labels)] = value
    return out


def status_value(store: Store, switch: str, family: str) -> float | None:
    snap = store.snapshot("gnmi", switch)
    return None if snap is None else snap.series.get(family, {}).get((switch,))


def expected_series(switch: SimSwitch, profile: str | None = None) -> dict[tuple[str, tuple], float]:
    """What each profile must export for a frozen simulated switch (values from SimPort.initial);
    `profile` when the source reads it with another profile of the same dialect (sonic-202511).

    Where a device sends two leaves for one series (FCS and CRC errors; interface-, carrier- and
    link-transitions) the profile's preferred one is expected, never a sum; leaves a test took
    away (`switch.absent`) leave the next one in rank."""
    prof = switch.profile
    sw = switch.name
    absent = switch.absent
    out: dict[tuple[str, tuple], float] = {}

    def put(family: str, labels: tuple, value: float) -> None:
        out[("infrapulse_switch_" + family, (sw, *labels))] = float(value)

    def first(*candidates: tuple[str, float]) -> float | None:
        return next((value for leaf, value in candidates if leaf not in absent), None)

    for port in switch.ports:
        i, name = port.index, port.name
        put("interface_received_bytes_total", (name,), 1_000_000 * (i + 1))
        put("interface_transmitted_bytes_total", (name,), 2_000_000 * (i + 1))
        put("interface_errors_total", (name, "rx"), i)
        put("interface_errors_total", (name, "tx"), 2 * i)
        put("interface_discards_total", (name, "rx"), 3 * i)
        put("interface_discards_total", (name, "tx"), 4 * i)
        fcs = 5 * i if prof == "sonic" else first(("in-fcs-errors", 5 * i), ("in-crc-errors", 5 * i + 1000))
        if fcs is not None:
            put("interface_fcs_errors_total", (name,), fcs)
        put("interface_oper_up", (name,), 1)
        if prof == "openconfig":
            flaps = first(("interface-transitions", 3), ("carrier-transitions", 1), ("link-transitions", 7))
        elif prof == "sonic":
            flaps = 1  # APPL_DB PORT_TABLE flap_count
        else:
            flaps = first(("carrier-transitions", 1))
        if flaps is not None:
            put("interface_carrier_transitions_total", (name,), flaps)
        if prof != "sonic":
            put("interface_mac_pause_frames_total", (name, "rx"), 7 * i + 3)
            put("interface_mac_pause_frames_total", (name, "tx"), 11 * i + 5)
        if prof in ("openconfig", "nvidia-cumulus"):
            put("interface_fec_uncorrectable_blocks_total", (name,), 13 * i + 2)
        for p in range(PRIORITIES):
            q = str(p)
            if prof != "openconfig":
                put("pfc_pause_frames_total", (name, q, "rx"), 10 * i + p)
                put("pfc_pause_frames_total", (name, q, "tx"), 20 * i + p)
            if prof == "nvidia-cumulus":
                put("pfc_pause_duration_seconds_total", (name, q, "rx"), (10 * i + p) * 1000 * 1e-6)
                put("pfc_pause_duration_seconds_total", (name, q, "tx"), (20 * i + p) * 1000 * 1e-6)
            put("queue_transmitted_packets_total", (name, q), 1000 * i + p)
            put("queue_dropped_packets_total", (name, q), p)
            put("queue_ecn_marked_packets_total", (name, q), 10 * p + i)
            if prof == "nvidia-cumulus" or (prof == "sonic" and p in gnmi_sonic.PFC_WD_QUEUES):
                put("queue_depth_bytes", (name, q), 100 * p)
            if prof == "arista-eos" and p:  # LANZ: congested queues only, whole 16-byte segments
                put("queue_depth_bytes", (name, q), (100 * p // 16) * 16)
            if prof != "arista-eos":
                put("queue_watermark_bytes", (name, q), 1000 * p + i)
            if prof in ("nvidia-cumulus", "arista-eos"):
                put("queue_wred_dropped_packets_total", (name, q), 2 * p + i + 1)
            if prof == "nvidia-cumulus":
                put("priority_discards_total", (name, q), 100 * i + 3 * p)
                put("priority_group_occupancy_bytes", (name, q, "shared"), 4096 * (p + 1) + i)
                put("priority_group_occupancy_bytes", (name, q, "headroom"), 512 * p + i)
            if prof == "arista-eos":
                # a healthy watchdog: every storm it detected it restored
                put("pfc_watchdog_storms_detected_total", (name, q), 3 * p + i)
                put("pfc_watchdog_storms_restored_total", (name, q), 3 * p + i)
        if port.neighbor:
            put("lldp_neighbor_info", (name, *port.neighbor), 1)
        if prof == "sonic":
            _sonic_series(put, switch.platform, i, name, priority_groups=profile == "sonic-202511")
    return out


def _sonic_series(put: Callable[[str, tuple, float], None], platform: str, i: int, name: str,
                  priority_groups: bool) -> None:
    """What only the SONiC dialect adds (values from SimPort.initial; see simulate/gnmi_sonic.py)."""
    put("interface_alias_info", (name, gnmi_sonic.alias(i)), 1)
    put("interface_last_down_timestamp_seconds", (name,), 1_764_583_200 + 60 * i)
    for p in range(PRIORITIES):
        q = str(p)
        put("queue_wred_dropped_packets_total", (name, q), p // 2)
        if priority_groups:
            put("priority_group_watermark_bytes", (name, q, "shared"), 2000 * p + i)
            put("priority_group_watermark_bytes", (name, q, "headroom"), 300 * p + i)
        if p in gnmi_sonic.PFC_WD_QUEUES:
            put("pfc_watchdog_storms_detected_total", (name, q), i + p)
            put("pfc_watchdog_storms_restored_total", (name, q), i + p)
        paused_us = 1000 * (10 * i + p)
        if platform == "marvell":  # pause quanta at 400G, back to seconds
            quanta = paused_us * gnmi_sonic.SPEED_MBPS // 512
            put("pfc_pause_duration_seconds_total", (name, q, "rx"),
                quanta * 512 / (gnmi_sonic.SPEED_MBPS * 1e6))
        else:  # mellanox: the SAI counter; broadcom: the PFC watchdog's estimate
            put("pfc_pause_duration_seconds_total", (name, q, "rx"), paused_us * 1e-6)
        if platform == "broadcom":
            put("pfc_pause_transitions_total", (name, q, "rx"), (10 * i + p) // 2)
