"""Each built-in profile accounts for every leaf its simulated switch sends: mapped by a rule or
ignored on purpose. `infrapulse_source_unmapped_total` then means "something unexpected arrived",
not "the usual leaves we never export", and the first-unmapped warning stays rare."""

from __future__ import annotations

import asyncio

import pytest

from conftest import running_daemon
from gnmi_support import serving
from infrapulse.simulate.gnmi_target import GnmiTarget, SimSwitch


@pytest.mark.parametrize("profile", ["openconfig", "sonic", "nvidia-cumulus", "arista-eos"])
async def test_every_simulated_leaf_is_mapped_or_ignored(profile: str) -> None:
    target = GnmiTarget(SimSwitch("leaf01", profile, ports=2, frozen=True))
    async with serving(target):
        config = f"""
sources:
  gnmi:
    defaults: {{insecure: true, sample_interval: 1s}}
    targets: [{{name: leaf01, address: "{target.address}", profile: {profile}}}]
"""
        async with running_daemon(config) as daemon:
            status = daemon.store.status_of("gnmi", "leaf01")
            for _ in range(100):  # two samples after the initial sync, and the sweep that reports them
                if status.up and status.coverage and any(c.series for c in status.coverage.values()):
                    await asyncio.sleep(2.5)
                    break
                await asyncio.sleep(0.1)
            coverage = dict(status.coverage)
    assert coverage, "the switch reported no coverage"
    unmapped = {m: (c.unmapped, c.sample) for m, c in coverage.items() if c.unmapped}
    assert unmapped == {}
    empty = sorted(m for m, c in coverage.items() if c.series == 0 and not c.superseded)
    assert empty == sorted(EMPTY_BY_DESIGN[profile])
    # A fallback leaf whose series a preferred leaf feeds is empty on purpose: marked superseded,
    # so neither /api/v1/sources' "empty" nor the health coverage note lists it.
    superseded = sorted(m for m, c in coverage.items() if c.series == 0 and c.superseded)
    assert superseded == SUPERSEDED.get(profile, [])


# Paths a 2-port simulated switch answers with nothing by design: LLDP (its ports have no
# neighbours) and SONiC pause counters of other platforms than the simulated one (Mellanox: µs
# durations only).
_SONIC_OTHER_PLATFORMS = [f"COUNTERS/Ethernet*/{name}" for p in range(8) for name in (
    f"EST_PORT_STAT_PFC_{p}_RX_PAUSE_DURATION_US", f"SAI_PORT_STAT_PFC_{p}_ON2OFF_RX_PKTS",
    f"SAI_PORT_STAT_PFC_{p}_RX_PAUSE_DURATION")]
EMPTY_BY_DESIGN = {
    "openconfig": ["/lldp/interfaces/interface[name=*]/neighbors"],
    "sonic": [*_SONIC_OTHER_PLATFORMS, "LLDP_ENTRY_TABLE"],
    "nvidia-cumulus": ["/lldp/interfaces/interface[name=*]/neighbors/neighbor[id=*]/state"],
    "arista-eos": ["/lldp/interfaces/interface[name=*]/neighbors"],
}
SUPERSEDED = {profile: ["/interfaces/interface[name=*]/ethernet/state/counters/in-crc-errors"]
              for profile in ("nvidia-cumulus", "arista-eos")}
