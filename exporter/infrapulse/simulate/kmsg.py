"""The kmsg source's demo part: a file of raw /dev/kmsg records in the shapes of the real captures
(../shared/real/kmsg), which the source reads and follows as it would /dev/kmsg."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .demo import DemoContext, DemoPart

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


def raw_records() -> str:
    return "".join(f"{level},{seq},{seq * 1_000_003},-;{message}\n"
                   for seq, (level, message) in enumerate(RECORDS, start=1))


async def demo_part(ctx: DemoContext) -> DemoPart:
    from .demo import DemoPart

    path = ctx.workdir / "kmsg.log"
    path.write_text(raw_records())

    async def close() -> None:
        return None

    sources = {"kmsg": {"enabled": True, "interval": "5s", "path": str(path), "boot_id_path": ""}}
    return DemoPart("kmsg", sources, close, description=f"kernel log records in {path}")
