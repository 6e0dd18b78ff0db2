"""A simulated `/sys/class/net/<if>/` for the netdevs of the node simulator.

The files and units are the kernel's (net/core/net-sysfs.c): `carrier` (1/0), `carrier_changes`,
`carrier_up_count`, `carrier_down_count`, `operstate`, `speed` (Mb/s). The PCI function's hwmon
device sits under `device/hwmon/hwmon<N>/` as mlx5 registers it (hwmon.c, Linux >= 6.5): `name`
is `mlx5`, each channel has `temp<N>_input`/`_crit`/`_highest` in millidegrees and a `_label`;
the module channel comes last. Only mlx5 netdevs get one (other drivers are not simulated).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# (label, millidegrees, crit millidegrees). mlx5 names a channel with the firmware's sensor
# name or "sensor<index>"; module 0 is sensor index 64.
MLX5_SENSORS = (("asic", 52_000, 105_000), ("sensor64", 41_000, 75_000))


@dataclass
class NetLink:
    """One interface's link state; `write()` publishes it."""

    interface: str
    speed_mbps: int
    hwmon: bool
    carrier: bool = True
    carrier_up: int = 1  # a link that came up once at boot
    carrier_down: int = 0

    @property
    def carrier_changes(self) -> int:
        return self.carrier_up + self.carrier_down

    def set_carrier(self, up: bool) -> None:
        if up == self.carrier:
            return
        self.carrier = up
        if up:
            self.carrier_up += 1
        else:
            self.carrier_down += 1

    def write(self, root: Path, module_millidegrees: int | None = None) -> None:
        base = root / "class" / "net" / self.interface
        files = {
            "carrier": str(int(self.carrier)), "carrier_changes": str(self.carrier_changes),
            "carrier_up_count": str(self.carrier_up), "carrier_down_count": str(self.carrier_down),
            "operstate": "up" if self.carrier else "down",
            "speed": str(self.speed_mbps) if self.carrier else "-1",
        }
        if self.hwmon:
            hw = "device/hwmon/hwmon0"
            files[f"{hw}/name"] = "mlx5"
            for channel, (label, milli, crit) in enumerate(MLX5_SENSORS, start=1):
                if label == "sensor64" and module_millidegrees is not None:
                    milli = module_millidegrees
                files[f"{hw}/temp{channel}_label"] = label
                files[f"{hw}/temp{channel}_input"] = str(milli)
                files[f"{hw}/temp{channel}_crit"] = str(crit)
                files[f"{hw}/temp{channel}_highest"] = str(milli)
        for rel, text in files.items():
            _write(base / rel, text)


def _write(path: Path, text: str) -> None:
    """Whole-file replace (readers open, read and close each file per poll)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text + "\n")
    os.replace(tmp, path)


def speed_mbps(rate: str) -> int:
    """'400 Gb/sec (4X NDR)' -> 400000."""
    return int(float(rate.split()[0]) * 1000)


def write_links(root: str | os.PathLike[str], links: dict[str, tuple[str, bool]]) -> dict[str, NetLink]:
    """`links`: interface -> (RDMA port rate text, has an mlx5 hwmon)."""
    out = {name: NetLink(name, speed_mbps(rate), hwmon) for name, (rate, hwmon) in links.items()}
    for link in out.values():
        link.write(Path(root))
    return out
