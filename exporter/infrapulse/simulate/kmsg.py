"""The kmsg source's demo part: a file of raw /dev/kmsg records in the shapes of the real captures
(../shared/real/kmsg), which the source reads and follows as it would /dev/kmsg. The GPU
scenarios write the driver's own lines when they start, as a real node's kernel log does beside
NVML's XID event: `xid` the XID 79 and "GPU has fallen off the bus" of its GPU
(nvrm-xid79-sxid20034-gpud-readme.txt), `xid-app-error` its XID 13."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..pci import sysfs_address

if TYPE_CHECKING:
    from .demo import DemoContext, DemoPart

log = logging.getLogger(__name__)

# (level, message): a node that booted, lost one RDMA link's health and saw corrected AER errors.
RECORDS = (
    (6, "nvidia-nvswitch0: open (major=510)"),
    (6, "mlx5_core 0000:0c:00.0: Port module event: module 0, Cable plugged"),
    (6, "mlx5_core 0000:0c:00.0 ens1f0np0: Link up"),
    (6, "mlx5_core 0000:0c:00.0 mlx5_0: Port: 1 Link ACTIVE"),
    (4, "pcieport 0000:00:1c.1: AER: Corrected error received: 0000:00:1c.1"),
    (4, "pcieport 0000:00:1c.1: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Transmitter ID)"),
    (4, "NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on "
        "(GPC 9, TPC 1, SM 1): Out Of Range Address"),
    (3, "mlx5_core 0000:0d:00.0: wait_func_handle_exec_timeout:1104:(pid 141183): cmd[22]: CREATE_DCT(0x710) "
        "No done completion"),
)


def raw_records(records: tuple[tuple[int, str], ...] = RECORDS, first: int = 1) -> str:
    return "".join(f"{level},{seq},{seq * 1_000_003},-;{message}\n"
                   for seq, (level, message) in enumerate(records, start=first))


def scenario_records(scenario: str, bus_id: str, uuid: str, xid: int) -> tuple[tuple[int, str], ...]:
    """What the driver logs when `scenario` hits the GPU at NVML `bus_id` (00000000:5D:00.0)."""
    address = sysfs_address(bus_id)  # 0000:5d:00.0
    short = address.rsplit(".", 1)[0]  # the Xid line's PCI:0000:5d:00
    if scenario == "xid":
        return ((3, f"NVRM: GPU at PCI:{short}: {uuid}"),
                (3, f"NVRM: Xid (PCI:{short}): {xid}, pid='<unknown>', name=<unknown>, GPU has fallen off "
                    "the bus."),
                (3, f"NVRM: GPU {address}: GPU has fallen off the bus."))
    return ((4, f"NVRM: Xid (PCI:{short}): {xid}, pid=4242, name=python3, Graphics Exception: ESR "
                "0x504648=0x80000000"),)


class KernelLogScenarios:
    """Appends each GPU scenario's records to the log file when the scenario starts."""

    def __init__(self, path: Path, board: Any, gpus: dict[str, tuple[str, str, int]]) -> None:
        self.path, self.board = path, board
        self.gpus = gpus  # scenario -> (NVML bus id, uuid, XID)
        self.seq = len(RECORDS)
        self.was_active: dict[str, bool] = {}

    def step(self) -> None:
        for name, (bus_id, uuid, xid) in self.gpus.items():
            active = self.board.active(name)
            if active and not self.was_active.get(name):
                records = scenario_records(name, bus_id, uuid, xid)
                with self.path.open("a") as f:
                    f.write(raw_records(records, self.seq + 1))
                self.seq += len(records)
            self.was_active[name] = active

    async def run(self, period: float = 0.5) -> None:
        while True:
            try:
                self.step()
            except OSError:
                log.exception("kernel-log scenario step failed")
            await asyncio.sleep(period)


def _scenario_gpus() -> dict[str, tuple[str, str, int]]:
    from .nvml_fake import DEFAULT_DATA, FakeNvml

    fake = FakeNvml.from_file(DEFAULT_DATA)
    out = {}
    for name in ("xid", "xid-app-error"):
        spec = fake.spec.get("scenarios", {}).get(name)
        if spec:
            gpu = fake.gpus[int(spec.get("gpu", 0)) % len(fake.gpus)]
            out[name] = (gpu.pci_bus_id, gpu.uuid, int(spec["xid"]))
    return out


async def demo_part(ctx: DemoContext) -> DemoPart:
    from .demo import DemoPart

    path = ctx.workdir / "kmsg.log"
    path.write_text(raw_records())
    follower = KernelLogScenarios(path, ctx.scenarios, _scenario_gpus())
    task = asyncio.create_task(follower.run(), name="simulate:kmsg")

    async def close() -> None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    sources = {"kmsg": {"enabled": True, "interval": "5s", "path": str(path), "boot_id_path": ""}}
    return DemoPart("kmsg", sources, close, description=f"kernel log records in {path}")
