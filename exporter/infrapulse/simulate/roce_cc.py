"""The simulated RoCE CC/QoS configuration of the demo node's mlx5 netdevs, and `fw-upgrade-cc-reset`.

`write_netdev(root, interface, ...)` lays out `root/class/net/<if>/ecn/roce_rp|roce_np/...` (the
NVIDIA OFED layout, parameters directly in the role folder or under `params/`) and `qos/`;
`write_platform(sim_dir, ...)` writes what the `roce_config` source's file reader stands in for
netlink DCB and ETHTOOL_GDRVINFO with. The demo's tuned configuration: PFC and ECN on priority 3,
DSCP 26 -> priority 3 (trust dscp), DCQCN tuned for low latency. `fw-upgrade-cc-reset` upgrades
the victim's firmware, turns ECN NP off on priority 3 and resets the RP parameters to the
firmware defaults; when it ends the configuration is restored (a rollback).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .node import ROCE_PRIORITY, VICTIM_DEVICE, VICTIM_NETDEV
from .scenarios import ScenarioBoard

if TYPE_CHECKING:
    from .demo import DemoContext, DemoPart

log = logging.getLogger("infrapulse.simulate.roce_cc")

SCENARIO = "fw-upgrade-cc-reset"
SCENARIOS = {
    SCENARIO: f"{VICTIM_NETDEV} ({VICTIM_DEVICE}): firmware 28.39.1002 -> 28.41.1000, ECN notification "
              f"point off "
              f"on priority {ROCE_PRIORITY} and the DCQCN reaction-point parameters reset to defaults "
              f"(no CNPs sent for ECN-marked packets)",
}
FIRMWARE = "28.39.1002"  # simulate/sysfs_tree.py DeviceSpec.fw_ver
UPGRADED_FIRMWARE = "28.41.1000"
# Firmware defaults (the values of the DCQCN tuning guides' "default" column; `[unconfirmed]` per
# firmware release) and a low-latency tuning an operator applied on top.
RP_DEFAULTS = {
    "clamp_tgt_rate": 0, "clamp_tgt_rate_after_time_inc": 1, "rpg_time_reset": 300, "rpg_byte_reset": 32767,
    "rpg_threshold": 1, "rpg_max_rate": 0, "rpg_ai_rate": 5, "rpg_hai_rate": 50, "rpg_gd": 11,
    "rpg_min_dec_fac": 50, "rpg_min_rate": 1, "rate_to_set_on_first_cnp": 0, "dce_tcp_g": 1019,
    "dce_tcp_rtt": 1, "rate_reduce_monitor_period": 4, "initial_alpha_value": 1023,
}
RP_TUNED = {**RP_DEFAULTS, "rpg_time_reset": 100, "rpg_ai_rate": 20, "rpg_hai_rate": 200,
            "rpg_min_dec_fac": 80, "rate_reduce_monitor_period": 2}
NP_PARAMS = {"min_time_between_cnps": 4, "cnp_dscp": 48, "cnp_802p_prio": 6}
DSCP_RDMA = 26


def _write(path: Path, text: str) -> None:
    """Write + rename: the source opens each file afresh, so it never sees a half-written one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text + "\n")
    tmp.replace(path)


def write_netdev(root: str | Path, interface: str, *, ecn: dict[str, set[int]] | None = None,
                 rp: dict[str, int] | None = None, np_params: dict[str, int] | None = None,
                 params_subdir: bool = False, with_ecn: bool = True, with_qos: bool = True,
                 empty: tuple[str, ...] = ()) -> Path:
    """One netdev's ecn/ and qos/ under root/class/net/<interface>. `ecn`: role -> priorities on;
    `empty`: paths relative to the netdev that read empty (a firmware error)."""
    net = Path(root) / "class" / "net" / interface
    net.mkdir(parents=True, exist_ok=True)
    if with_ecn:
        on = ecn if ecn is not None else {"roce_np": {ROCE_PRIORITY}, "roce_rp": {ROCE_PRIORITY}}
        for role, params in (("roce_rp", rp if rp is not None else RP_TUNED),
                             ("roce_np", np_params if np_params is not None else NP_PARAMS)):
            for prio in range(8):
                _write(net / "ecn" / role / "enable" / str(prio), "1" if prio in on.get(role, ()) else "0")
            base = net / "ecn" / role / ("params" if params_subdir else "")
            for name, value in params.items():
                _write(base / name, str(value))
    if with_qos:
        _write(net / "qos" / "tc_num", "8")
        _write(net / "qos" / "prio2buffer", "Priority\tBuffer\n" + "\n".join(
            f"{p}\t\t{1 if p == ROCE_PRIORITY else 0}" for p in range(8)))
        _write(net / "qos" / "buffer_size", "Port buffer size = 262016\nSpare buffer size = 0\n"
               "Buffer\tSize\txoff_threshold\txon_threshold\n" + "\n".join(
                   f"{b}\t{s}\t{x}\t\t{y}" for b, s, x, y in
                   ((0, 130944, 0, 0), (1, 131072, 79360, 51200), *((b, 0, 0, 0) for b in range(2, 8)))))
    for rel in empty:
        (net / rel).write_text("")
    return net


def platform_json(pfc: set[int] | None = None, dscp: dict[int, int] | None = None,
                  driver_version: str = "24.10-1.1.4") -> dict[str, object]:
    return {
        "dcb": {"pfc_enabled": {str(p): int(p in (pfc if pfc is not None else {ROCE_PRIORITY}))
                                for p in range(8)},
                "pfc_capable": 8,
                "dscp_to_priority": {str(k): v for k, v in
                                     (dscp if dscp is not None
                                      else {DSCP_RDMA: ROCE_PRIORITY, 48: 6}).items()}},
        "drvinfo": {"driver": "mlx5_core", "version": driver_version},
    }


def write_platform(sim_dir: str | Path, interface: str, data: dict[str, object]) -> None:
    path = Path(sim_dir) / f"{interface}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


class RoceConfigSimulator:
    """Keeps the demo node's CC/QoS tree in the state the scenario board asks for."""

    def __init__(self, sysfs_root: Path, sim_dir: Path, netdevs: list[str], board: ScenarioBoard) -> None:
        self.sysfs_root = sysfs_root
        self.sim_dir = sim_dir
        self.netdevs = netdevs
        self.board = board
        self._upgraded: bool | None = None

    def step(self) -> None:
        upgraded = self.board.active(SCENARIO)
        if upgraded == self._upgraded:
            return
        self._upgraded = upgraded
        # The firmware first, as an upgrade does: a read between the two sees the new firmware.
        fw = self.sysfs_root / "class" / "infiniband" / VICTIM_DEVICE / "fw_ver"
        if fw.parent.is_dir():  # in place, as sysfs (the infiniband source's tree): same length
            fd = os.open(fw, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.pwrite(fd, ((UPGRADED_FIRMWARE if upgraded else FIRMWARE) + "\n").encode(), 0)
            finally:
                os.close(fd)
        for netdev in self.netdevs:
            victim = netdev == VICTIM_NETDEV and upgraded
            ecn = {"roce_np": set() if victim else {ROCE_PRIORITY}, "roce_rp": {ROCE_PRIORITY}}
            write_netdev(self.sysfs_root, netdev, ecn=ecn, rp=RP_DEFAULTS if victim else RP_TUNED)
            write_platform(self.sim_dir, netdev, platform_json())

    async def run(self, period: float = 1.0) -> None:
        while True:
            try:
                await asyncio.to_thread(self.step)
            except OSError:
                log.exception("RoCE config simulator step failed")
            await asyncio.sleep(period)


async def demo_part(ctx: DemoContext) -> DemoPart:
    from .demo import DemoPart

    # The node part (simulate/node.py, started before this one) writes class/infiniband here.
    sysfs_root = ctx.workdir / "node-sysfs"
    sim_dir = ctx.workdir / "node-roce-config"
    netdevs = [f"ens{i + 1}f0np0" for i in range(4)]  # the mlx5 RoCE netdevs of demo_devices()
    sim = RoceConfigSimulator(sysfs_root, sim_dir, netdevs, ctx.scenarios)
    await asyncio.to_thread(sim.step)
    task = asyncio.create_task(sim.run(1.0), name="simulate:roce_cc")

    async def close() -> None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    sources = {"roce_config": {
        "enabled": True, "sysfs_root": str(sysfs_root), "sim_dir": str(sim_dir),
        "interfaces": ["ens[1-4]f0np0"], "interval": "2s",
        "expected": {"pfc_priorities": [ROCE_PRIORITY], "ecn_priorities": [ROCE_PRIORITY], "trust": "dscp",
                     "cc_parameters": {"rpg_ai_rate": RP_TUNED["rpg_ai_rate"],
                                       "rpg_time_reset": RP_TUNED["rpg_time_reset"]}},
    }}
    return DemoPart("roce_cc", sources, close,
                    description=f"RoCE CC/QoS config of {', '.join(netdevs)} under {sysfs_root}/class/net; "
                                f"DCB and driver info in {sim_dir}")
