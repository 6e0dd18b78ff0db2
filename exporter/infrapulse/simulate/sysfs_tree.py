"""A realistic `/sys/class/infiniband` tree on disk, whose counters can be advanced in place.

`write_tree(root, ...)` lays out `root/class/infiniband/<device>/ports/<port>/...` the way the
kernel does (state, phys_state, rate, link_layer, gid_attrs/ndevs, counters/, hw_counters/),
so both infrapulse and `prometheus-node-exporter --path.sysfs=root` can read it.

Files are rewritten *in place* (pwrite into the same inode), never replaced by rename:
the infiniband source keeps its own descriptors open and preads from offset 0, exactly as on
real sysfs, so a renamed-over file would be invisible to it until the next rescan.

Initial counter values are derived from a CRC of the file path: stable across Python
versions, so golden files built from a tree never change by accident.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..sources.nic.infiniband import PMA_COUNTER_BITS

NO_PMA = "N/A (no PMA)"

# mlx5 per-port hw_counters in normal (non-switchdev) mode, as a ConnectX-6/7 shows them.
MLX5_Q_COUNTERS = (
    "rx_write_requests", "rx_read_requests", "rx_atomic_requests", "rx_dct_connect", "out_of_buffer",
    "out_of_sequence", "duplicate_request", "rnr_nak_retry_err", "packet_seq_err", "implied_nak_seq_err",
    "local_ack_timeout_err", "resp_local_length_error", "resp_cqe_error", "req_cqe_error",
    "req_remote_invalid_request", "req_remote_access_errors", "resp_remote_access_errors",
    "resp_cqe_flush_error", "req_cqe_flush_error", "req_transport_retries_exceeded",
    "req_rnr_retries_exceeded", "roce_adp_retrans", "roce_adp_retrans_to", "roce_slow_restart",
    "roce_slow_restart_cnps", "roce_slow_restart_trans",
)
MLX5_CONG_COUNTERS = ("rp_cnp_ignored", "rp_cnp_handled", "np_ecn_marked_roce_packets", "np_cnp_sent",
                      "rx_icrc_encapsulated")
MLX5_HW_COUNTERS = MLX5_Q_COUNTERS + MLX5_CONG_COUNTERS
# A few of irdma's names (Intel E810): a driver with hw_counters but no counters/ at all.
IRDMA_HW_COUNTERS = ("ip4InOctets", "ip4OutOctets", "ip4InPkts", "ip4OutPkts", "tcpRetransSegs",
                     "RxRoCEv2Pkts", "TxRoCEv2Pkts", "RxECNMrkd", "RxCNPHandled", "TxCNPSent")


@dataclass
class PortSpec:
    number: int = 1
    link_layer: str = "InfiniBand"  # "Ethernet" = RoCE
    netdev: str = ""  # RoCE ports: the netdev behind gid_attrs/ndevs
    rate: str = "200 Gb/sec (4X HDR)"
    state: str = "4: ACTIVE"
    phys_state: str = "5: LinkUp"
    counters: str = "ok"  # "ok" | "na" (every file reads N/A (no PMA)) | "absent" (no counters/)
    hw_counters: tuple[str, ...] = MLX5_HW_COUNTERS
    # Exact file contents relative to the port dir ("counters/port_xmit_wait": 4294967295).
    overrides: dict[str, int | str] = field(default_factory=dict)


@dataclass
class DeviceSpec:
    name: str
    ports: list[PortSpec] = field(default_factory=lambda: [PortSpec()])
    hca_type: str = "MT4129"
    board_id: str = "MT_0000000838"
    fw_ver: str = "28.39.1002"
    node_guid: str = ""
    device_hw_counters: tuple[str, ...] = ()  # device-level hw_counters (switchdev mode, hfi1)
    # The PCI function: `device` -> ../../../devices/pci0000:00/<pci_address> ("" = no link, as a
    # software device and the real fixture trees have none).
    pci_address: str = ""


def bench_devices(count: int = 8) -> list[DeviceSpec]:
    """`count` mlx5 devices, one InfiniBand port each, every PMA counter and hw_counter."""
    return [DeviceSpec(f"mlx5_{i}") for i in range(count)]


def demo_devices() -> list[DeviceSpec]:
    """The demo node: RoCE and IB mlx5 ports, an old iWARP device whose PMA reads N/A, an irdma
    device with no counters/, a switchdev-mode device with device-level hw_counters, and a
    Broadcom bnxt_re RoCE port (no counters/; its hw_counters are not simulated: no capture)."""
    # mlx5_<i> on PCI bus 0x0c + i: mlx5_0 is the 0000:0c:00.0 of the demo kernel log (simulate/kmsg.py).
    roce = [DeviceSpec(f"mlx5_{i}", hca_type="MT4129", pci_address=f"0000:{0x0c + i:02x}:00.0",
                       ports=[PortSpec(link_layer="Ethernet", netdev=f"ens{i + 1}f0np0",
                                       rate="400 Gb/sec (4X NDR)")]) for i in range(4)]
    ib = [DeviceSpec(f"mlx5_{i}", hca_type="MT4129", pci_address=f"0000:{0x0c + i:02x}:00.0",
                     ports=[PortSpec(rate="400 Gb/sec (4X NDR)")]) for i in (4, 5)]
    switchdev = DeviceSpec("mlx5_6", hca_type="MT4125", ports=[PortSpec(
        link_layer="Ethernet", netdev="ens7f0np0", rate="200 Gb/sec (4X HDR)", hw_counters=MLX5_Q_COUNTERS)],
        device_hw_counters=MLX5_CONG_COUNTERS)
    iwarp = DeviceSpec("i40iw0", hca_type="I40IW", board_id="I40IW Board ID", fw_ver="0.2", ports=[PortSpec(
        link_layer="Ethernet", netdev="eno1", rate="10 Gb/sec (4X)", counters="na", hw_counters=())])
    irdma = DeviceSpec("irdma0", hca_type="E810", board_id="E810-XXVDA2", fw_ver="1.57", ports=[PortSpec(
        link_layer="Ethernet", netdev="ens9f0", rate="25 Gb/sec (1X EDR)", counters="absent",
        hw_counters=IRDMA_HW_COUNTERS)])
    bnxt = DeviceSpec("bnxt_re0", hca_type="", board_id="", fw_ver="220.0.57.0", ports=[PortSpec(
        link_layer="Ethernet", netdev="ens10f0np0", rate="25 Gb/sec (1X EDR)", counters="absent",
        hw_counters=())])
    return roce + ib + [switchdev, iwarp, irdma, bnxt]


def initial_value(path: str, name: str) -> int:
    """A stable, plausible starting value for a counter file."""
    h = zlib.crc32(path.encode())
    if name in ("port_xmit_data", "port_rcv_data"):
        return 10**9 + h % 10**12
    if name.endswith("packets"):
        return 10**6 + h % 10**10
    bits = PMA_COUNTER_BITS.get(name)
    if bits is not None and bits < 32:
        return h % min(50, (1 << bits) - 1)  # 2**bits: int ** int is Any to mypy
    if name.startswith(("rx_", "np_", "rp_", "ip4", "Rx", "Tx")):
        return h % 10**7
    return h % 500


class SysfsTree:
    """A written tree, its current counter values, and in-place rewriting of its files."""

    def __init__(self, root: Path, devices: list[DeviceSpec]) -> None:
        self.root = Path(root)
        self.devices = devices
        self.values: dict[str, int] = {}  # counter path (relative to class/infiniband) -> value
        self._lengths: dict[str, int] = {}

    @property
    def class_dir(self) -> Path:
        return self.root / "class" / "infiniband"

    # -- writing ---------------------------------------------------------------------------------

    def write_text(self, rel: str, text: str) -> None:
        """Replace a file's content in place (same inode, as sysfs behaves).

        Counters only grow, so the new text covers the old; a shorter text is truncated after.
        Descriptors are not kept: a demo tree has hundreds of files and the reader keeps its own.
        """
        data = text.encode() if text.endswith("\n") else (text + "\n").encode()
        path = self.class_dir / rel
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.pwrite(fd, data, 0)
            if len(data) < self._lengths.get(rel, 0):
                os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
        self._lengths[rel] = len(data)

    def set(self, rel: str, value: int) -> None:
        self.values[rel] = value
        self.write_text(rel, str(value))

    def add(self, rel: str, delta: int, bits: int | None = None, saturate: bool = False) -> None:
        """Advance a counter by `delta`; 32-bit Q counters wrap, PMA error counters saturate."""
        if rel not in self.values:
            return  # this device has no such file (N/A, absent counters/, other driver)
        value = self.values[rel] + delta
        if bits is not None:
            top = 2**bits
            value = min(value, top - 1) if saturate else value % top
        self.set(rel, value)


def write_tree(root: str | Path, devices: int | Iterable[DeviceSpec] = 8) -> SysfsTree:
    """Write `root/class/infiniband/...`; `devices` is a count (bench layout) or specs."""
    specs = bench_devices(devices) if isinstance(devices, int) else list(devices)
    tree = SysfsTree(Path(root), specs)
    for dev in specs:
        d = dev.name
        guid = dev.node_guid or "{:04x}:{:04x}:{:04x}:{:04x}".format(
            *(zlib.crc32(f"{d}{i}".encode()) & 0xFFFF for i in range(4)))
        for name, text in (("fw_ver", dev.fw_ver), ("board_id", dev.board_id), ("hca_type", dev.hca_type),
                           ("node_guid", guid), ("node_type", "1: CA"), ("node_desc", f"sim {d}")):
            tree.write_text(f"{d}/{name}", text)
        for name in dev.device_hw_counters:
            rel = f"{d}/hw_counters/{name}"
            tree.set(rel, initial_value(rel, name))
        if dev.device_hw_counters:
            tree.write_text(f"{d}/hw_counters/lifespan", "10")
        if dev.pci_address:
            _link_device(tree, d, dev.pci_address)
        for port in dev.ports:
            _write_port(tree, d, port)
    return tree


def _link_device(tree: SysfsTree, device: str, pci_address: str) -> None:
    """`class/infiniband/<device>/device` -> the PCI function's directory under `devices/`, a
    relative link as the kernel makes it (there `../../../0000:0d:00.0` from the device's own
    directory under the function; here the class entry is a plain directory, so it climbs to the root)."""
    function = tree.root / "devices" / "pci0000:00" / pci_address
    function.mkdir(parents=True, exist_ok=True)
    link = tree.class_dir / device / "device"
    if not link.is_symlink():
        link.symlink_to(os.path.relpath(function, link.parent))


def _write_port(tree: SysfsTree, device: str, port: PortSpec) -> None:
    base = f"{device}/ports/{port.number}"
    for name, text in (("state", port.state), ("phys_state", port.phys_state), ("rate", port.rate),
                       ("link_layer", port.link_layer), ("lid", "0x0" if port.link_layer == "Ethernet"
                                                          else f"0x{zlib.crc32(base.encode()) & 0xFFF:x}")):
        tree.write_text(f"{base}/{name}", text)
    # GID table: entries 0-1 carry the netdev on RoCE; unused entries are empty (the kernel
    # answers EINVAL for them), as are all entries of an InfiniBand port.
    for idx in range(4):
        ndev = port.netdev if port.link_layer == "Ethernet" and idx < 2 else ""
        tree.write_text(f"{base}/gid_attrs/ndevs/{idx}", ndev)
        gid_type = ("IB/RoCE v1" if idx % 2 == 0 else "RoCE v2") if ndev else ""
        tree.write_text(f"{base}/gid_attrs/types/{idx}", gid_type)
    if port.counters != "absent":
        for name in PMA_COUNTER_BITS:
            rel = f"{base}/counters/{name}"
            if port.counters == "na":
                tree.write_text(rel, NO_PMA)
            else:
                tree.set(rel, initial_value(rel, name))
    if port.hw_counters:
        for name in port.hw_counters:
            rel = f"{base}/hw_counters/{name}"
            tree.set(rel, initial_value(rel, name))
        tree.write_text(f"{base}/hw_counters/lifespan", "10")
    for rel, content in port.overrides.items():
        if isinstance(content, int):
            tree.set(f"{base}/{rel}", content)
        else:
            tree.values.pop(f"{base}/{rel}", None)
            tree.write_text(f"{base}/{rel}", content)
