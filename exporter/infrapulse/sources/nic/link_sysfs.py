"""Link state of a netdev from sysfs, read by the `ethtool` source next to the driver statistics.

Per interface, from `{sysfs_root}/class/net/<if>/` (net/core/net-sysfs.c, readable by anyone):

- `carrier` (1/0; EINVAL while the interface is administratively down: exported as 0),
- `carrier_changes`, `carrier_up_count`, `carrier_down_count` (kernel >= 4.16 for the last two;
  every carrier transition, whatever the driver counts itself),
- `speed` (Mb/s; -1 or EINVAL without a link: not exported), the denominator of a bit error
  ratio when the driver has no received-bits counter,
- the NIC's hwmon temperatures: `device/hwmon/hwmon*/temp<N>_input` (millidegrees) with
  `temp<N>_label` and `temp<N>_crit`. mlx5 registers its hwmon device on the PCI function
  under the name `mlx5` (drivers/net/ethernet/mellanox/mlx5/core/hwmon.c, Linux >= 6.5): one
  channel per ASIC sensor and, when the cage's module reports a temperature, one for the module
  (labelled with the firmware's sensor name, or `sensor<index>`; module 0 is sensor 64).

A netdev with no directory under class/net (a simulated interface with no tree) contributes
nothing and its coverage says so; a file that fails for another reason is a partial error.
Transceiver DOM through the module EEPROM (ETHTOOL_GMODULEEEPROM) needs CAP_NET_ADMIN and is
not read here: see docs/node-telemetry.md, "Link health".
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ...store import Snapshot
from .families import (
    CARRIER_CHANGES,
    CARRIER_DOWN,
    CARRIER_UP,
    CARRIER_UP_EVENTS,
    LINK_SPEED,
    NIC_TEMPERATURE,
    NIC_TEMPERATURE_CRIT,
)

# sysfs file -> family; counters first, then the carrier gauge.
COUNTER_FILES = (("carrier_changes", CARRIER_CHANGES.name), ("carrier_up_count", CARRIER_UP_EVENTS.name),
                 ("carrier_down_count", CARRIER_DOWN.name))
LINK_FAMILIES = (CARRIER_CHANGES.name, CARRIER_UP_EVENTS.name, CARRIER_DOWN.name, CARRIER_UP.name,
                 LINK_SPEED.name, NIC_TEMPERATURE.name)
MEGABIT_BYTES = 125_000  # 1 Mb/s in bytes per second
_TEMP_INPUT = re.compile(r"temp(\d+)_input")
READ_SIZE = 64


@dataclass
class LinkReading:
    """What one read of an interface's link files produced."""

    series: dict[str, dict[tuple[str, ...], float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    present: bool = True  # False: no class/net/<if> directory at all


def _read(path: Path) -> str:
    with open(path, "rb") as f:
        return f.read(READ_SIZE).decode("ascii", "replace").strip()


def _hwmon_dirs(device_dir: Path) -> list[Path]:
    try:
        names = sorted(os.listdir(device_dir / "hwmon"))
    except OSError:
        return []  # no hwmon: an older kernel or a driver without one
    return [device_dir / "hwmon" / n for n in names if n.startswith("hwmon")]


def read_link(sysfs_root: str | os.PathLike[str], interface: str) -> LinkReading:
    """Read the carrier counters, speed and hwmon temperatures of one interface."""
    out = LinkReading()
    base = Path(sysfs_root) / "class" / "net" / interface
    if not base.is_dir():
        out.present = False
        return out
    labels = (interface,)
    for fname, family in COUNTER_FILES:
        try:
            out.series[family] = {labels: int(_read(base / fname))}
        except FileNotFoundError:
            continue  # carrier_up/down_count: kernels before 4.16
        except (OSError, ValueError) as exc:
            out.errors.append(f"{interface}/{fname}: {getattr(exc, 'strerror', None) or exc}")
    try:
        out.series[CARRIER_UP.name] = {labels: float(int(_read(base / "carrier")))}
    except OSError as exc:
        if exc.errno == errno.EINVAL:  # not running (admin down): no carrier
            out.series[CARRIER_UP.name] = {labels: 0.0}
        elif exc.errno != errno.ENOENT:
            out.errors.append(f"{interface}/carrier: {exc.strerror or exc}")
    except ValueError as exc:
        out.errors.append(f"{interface}/carrier: {exc}")
    try:
        speed = int(_read(base / "speed"))
        if speed > 0:
            out.series[LINK_SPEED.name] = {labels: float(speed * MEGABIT_BYTES)}
    except (OSError, ValueError):
        pass  # no link, or a virtual device without a speed: nothing to divide by
    _read_hwmon(base / "device", interface, out)
    return out


def _read_hwmon(device_dir: Path, interface: str, out: LinkReading) -> None:
    for hwmon in _hwmon_dirs(device_dir):
        try:
            files = os.listdir(hwmon)
        except OSError:
            continue
        for fname in sorted(files):
            match = _TEMP_INPUT.fullmatch(fname)
            if match is None:
                continue
            channel = match.group(1)
            try:
                sensor = _read(hwmon / f"temp{channel}_label")
            except OSError:
                sensor = f"temp{channel}"
            labels = (interface, sensor or f"temp{channel}")
            try:
                out.series.setdefault(NIC_TEMPERATURE.name, {})[labels] = int(_read(hwmon / fname)) / 1000
            except (OSError, ValueError) as exc:
                why = getattr(exc, "strerror", None) or exc
                out.errors.append(f"{interface} {hwmon.name}/{fname}: {why}")
                continue
            try:
                crit = int(_read(hwmon / f"temp{channel}_crit")) / 1000
                out.series.setdefault(NIC_TEMPERATURE_CRIT.name, {})[labels] = crit
            except (OSError, ValueError):
                pass  # no threshold for this sensor


def add_to(snap: Snapshot, reading: LinkReading) -> None:
    for family, values in reading.series.items():
        snap.series.setdefault(family, {}).update(values)


def link_coverage(reading: LinkReading) -> dict[str, int]:
    """Series per link family (0 for what this interface does not have)."""
    return {family: len(reading.series.get(family, {})) for family in LINK_FAMILIES}
