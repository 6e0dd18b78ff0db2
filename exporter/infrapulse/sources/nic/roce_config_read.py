"""Read the RoCE congestion-control and QoS configuration of one netdev from sysfs (and debugfs).

Layouts (docs/roce-config.md cites the driver source; all `[unconfirmed]` until a capture exists):

- NVIDIA OFED/DOCA mlx5 (`en_sysfs.c`): `/sys/class/net/<if>/ecn/roce_rp|roce_np/enable/<0..7>`
  (0/1), the DCQCN parameters directly in `roce_rp/` and `roce_np/`; some releases put them in a
  `params/` subfolder: both are read. A firmware error makes a file read empty. VFs have no `ecn/`.
- `/sys/class/net/<if>/qos/`: `tc_num`, `prio2buffer`, `buffer_size` (OFED), `trust` (older OFED).
- Upstream kernels: the same parameters only in debugfs, `<debugfs>/mlx5/<pci>/cc_params/<name>`
  (`drivers/infiniband/hw/mlx5/cong.c`; root only, each read a firmware command), read rarely.

Nothing here raises for a data problem: what cannot be read becomes a sentence in `problems`.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

ROLES = ("roce_rp", "roce_np")
RP_PARAMS = (
    "clamp_tgt_rate", "clamp_tgt_rate_after_time_inc", "rpg_time_reset", "rpg_byte_reset", "rpg_threshold",
    "rpg_max_rate", "rpg_ai_rate", "rpg_hai_rate", "rpg_gd", "rpg_min_dec_fac", "rpg_min_rate",
    "rate_to_set_on_first_cnp", "dce_tcp_g", "dce_tcp_rtt", "rate_reduce_monitor_period",
    "initial_alpha_value",
)
NP_PARAMS = ("min_time_between_cnps", "cnp_dscp", "cnp_802p_prio")
PARAMS = {"roce_rp": RP_PARAMS, "roce_np": NP_PARAMS}
# debugfs cc_params file -> (role, the OFED sysfs name): the names of mlx5_ib_dbg_cc_name[].
DEBUGFS_NAMES = {
    "rp_clamp_tgt_rate": ("roce_rp", "clamp_tgt_rate"),
    "rp_clamp_tgt_rate_ati": ("roce_rp", "clamp_tgt_rate_after_time_inc"),
    "rp_time_reset": ("roce_rp", "rpg_time_reset"), "rp_byte_reset": ("roce_rp", "rpg_byte_reset"),
    "rp_threshold": ("roce_rp", "rpg_threshold"), "rp_ai_rate": ("roce_rp", "rpg_ai_rate"),
    "rp_max_rate": ("roce_rp", "rpg_max_rate"), "rp_hai_rate": ("roce_rp", "rpg_hai_rate"),
    "rp_min_dec_fac": ("roce_rp", "rpg_min_dec_fac"), "rp_min_rate": ("roce_rp", "rpg_min_rate"),
    "rp_rate_to_set_on_first_cnp": ("roce_rp", "rate_to_set_on_first_cnp"),
    "rp_dce_tcp_g": ("roce_rp", "dce_tcp_g"), "rp_dce_tcp_rtt": ("roce_rp", "dce_tcp_rtt"),
    "rp_rate_reduce_monitor_period": ("roce_rp", "rate_reduce_monitor_period"),
    "rp_initial_alpha_value": ("roce_rp", "initial_alpha_value"), "rp_gd": ("roce_rp", "rpg_gd"),
    "np_min_time_between_cnps": ("roce_np", "min_time_between_cnps"), "np_cnp_dscp": ("roce_np", "cnp_dscp"),
    "np_cnp_prio": ("roce_np", "cnp_802p_prio"), "np_cnp_prio_mode": ("roce_np", "cnp_prio_mode"),
}
_INT = re.compile(r"-?\d+")


class EmptyRead(Exception):
    """The file exists but read empty: what the OFED driver shows on a firmware command error."""


def read_text(path: Path) -> str:
    with open(path, "rb") as f:
        text = f.read(8192).decode("ascii", "replace").strip()
    if not text:
        raise EmptyRead(str(path))
    return text


def read_int(path: Path) -> int:
    text = read_text(path)
    match = _INT.search(text)
    if match is None:
        raise ValueError(f"{path}: not an integer: {text[:40]!r}")
    return int(match.group())


@dataclass
class NetdevConfig:
    """The CC/QoS configuration of one netdev, as read. Keys of `params`: (role, parameter)."""

    interface: str
    device: str = ""  # the RDMA device behind it (mlx5_0), "" when none
    ecn: dict[tuple[str, int], int] = field(default_factory=dict)  # (role, priority) -> 0/1
    params: dict[tuple[str, str], int] = field(default_factory=dict)
    params_from: str = ""  # "sysfs", "sysfs params/", "debugfs" or "" (none read)
    tc_num: int | None = None
    prio2buffer: dict[int, int] = field(default_factory=dict)
    buffer_size: dict[int, int] = field(default_factory=dict)  # buffer -> bytes
    trust: str = ""  # "dscp" / "pcp" / "" unknown
    trust_source: str = ""  # "qos/trust" or "inferred"
    pfc_enabled: dict[int, int] = field(default_factory=dict)
    dscp_to_priority: dict[int, int] = field(default_factory=dict)
    dcb_state: str = ""  # "ok", "not_supported", "error: ..." ("" = not read)
    firmware: str = ""
    driver: str = ""
    driver_version: str = ""
    problems: list[str] = field(default_factory=list)
    # Settings that exist but could not be read this time (empty on a firmware error, EIO): the
    # configuration is then incomplete, not changed.
    unreadable: int = 0

    def canonical(self) -> dict[str, object]:
        """What the config hash and the persisted state cover: the configuration, not how or
        whether it could be read (problems) nor the software versions."""
        return {
            "ecn": {f"{r}/{p}": v for (r, p), v in sorted(self.ecn.items())},
            "params": {f"{r}/{n}": v for (r, n), v in sorted(self.params.items())},
            "tc_num": self.tc_num,
            "prio2buffer": {str(k): v for k, v in sorted(self.prio2buffer.items())},
            "buffer_size": {str(k): v for k, v in sorted(self.buffer_size.items())},
            "trust": self.trust,
            "pfc_enabled": {str(k): v for k, v in sorted(self.pfc_enabled.items())},
            "dscp_to_priority": {str(k): v for k, v in sorted(self.dscp_to_priority.items())},
        }

    def config_hash(self) -> str:
        """Stable across processes and hosts: sha256 of the canonical JSON, first 12 hex digits."""
        blob = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def flat(self) -> dict[str, str]:
        """One "key: value" per setting, for change logs: `roce_np/enable/3`, `roce_rp/rpg_ai_rate`."""
        out: dict[str, str] = {}
        canon = self.canonical()
        for section in ("ecn", "params"):
            items = canon[section]
            assert isinstance(items, dict)
            for key, value in items.items():
                role, name = key.split("/", 1)
                out[f"{role}/enable/{name}" if section == "ecn" else key] = str(value)
        out["qos/tc_num"] = "" if self.tc_num is None else str(self.tc_num)
        for prio, buf in sorted(self.prio2buffer.items()):
            out[f"qos/prio2buffer/{prio}"] = str(buf)
        for buf, size in sorted(self.buffer_size.items()):
            out[f"qos/buffer_size/{buf}"] = str(size)
        out["qos/trust"] = self.trust
        for prio, on in sorted(self.pfc_enabled.items()):
            out[f"pfc/{prio}"] = str(on)
        for dscp, prio in sorted(self.dscp_to_priority.items()):
            out[f"dscp/{dscp}"] = str(prio)
        return {k: v for k, v in out.items() if v != ""}


def _note_error(cfg: NetdevConfig, rel: str, exc: Exception) -> None:
    cfg.unreadable += 1
    if isinstance(exc, EmptyRead):
        cfg.problems.append(f"{cfg.interface}: {rel} read empty (a firmware command error in the driver)")
    elif isinstance(exc, OSError):
        cfg.problems.append(f"{cfg.interface}: {rel}: {exc.strerror or exc}")
    else:
        cfg.problems.append(f"{cfg.interface}: {rel}: {exc}")


def read_ecn(cfg: NetdevConfig, net_dir: Path) -> bool:
    """ECN enable flags and the DCQCN parameters under net_dir/ecn. False when there is no ecn/."""
    ecn_dir = net_dir / "ecn"
    if not ecn_dir.is_dir():
        return False
    for role in ROLES:
        role_dir = ecn_dir / role
        for prio in range(8):
            rel = f"ecn/{role}/enable/{prio}"
            try:
                cfg.ecn[(role, prio)] = 1 if read_int(role_dir / "enable" / str(prio)) else 0
            except FileNotFoundError:
                continue
            except (OSError, ValueError, EmptyRead) as exc:
                _note_error(cfg, rel, exc)
        # Both layouts: the parameter files directly in the role folder, or in params/.
        base = role_dir / "params" if (role_dir / "params").is_dir() else role_dir
        sub = "params/" if base.name == "params" else ""
        for name in PARAMS[role]:
            try:
                cfg.params[(role, name)] = read_int(base / name)
            except FileNotFoundError:
                continue
            except (OSError, ValueError, EmptyRead) as exc:
                _note_error(cfg, f"ecn/{role}/{sub}{name}", exc)
                continue
            cfg.params_from = f"sysfs {sub}".strip()
    return True


def read_debugfs(cfg: NetdevConfig, cc_dir: Path) -> str:
    """DCQCN parameters from debugfs cc_params/. Returns "" when read, else why not (a reason,
    never an exception: debugfs is root-only and often not mounted)."""
    try:
        names = sorted(os.listdir(cc_dir))
    except PermissionError:
        return f"{cc_dir} is not readable (debugfs needs root)"
    except FileNotFoundError:
        return f"{cc_dir} does not exist (debugfs not mounted, or no mlx5 cc_params)"
    except OSError as exc:
        return f"{cc_dir}: {exc.strerror or exc}"
    read = 0
    for name in names:
        target = DEBUGFS_NAMES.get(name)
        if target is None:
            continue
        try:
            cfg.params[target] = read_int(cc_dir / name)
            read += 1
        except PermissionError:
            return f"{cc_dir} is not readable (debugfs needs root)"
        except (OSError, ValueError, EmptyRead) as exc:
            _note_error(cfg, f"debugfs cc_params/{name}", exc)
    if read:
        cfg.params_from = "debugfs"
        return ""
    return f"{cc_dir} has no known parameter file"


def read_qos(cfg: NetdevConfig, net_dir: Path) -> None:
    qos = net_dir / "qos"
    if not qos.is_dir():
        return
    try:
        cfg.tc_num = read_int(qos / "tc_num")
    except FileNotFoundError:
        pass
    except (OSError, ValueError, EmptyRead) as exc:
        _note_error(cfg, "qos/tc_num", exc)
    try:
        # "Priority\tBuffer\n0\t\t0\n..." (OFED en_sysfs.c mlx5e_show_prio2buffer)
        for line in read_text(qos / "prio2buffer").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                cfg.prio2buffer[int(parts[0])] = int(parts[1])
    except FileNotFoundError:
        pass
    except (OSError, EmptyRead) as exc:
        _note_error(cfg, "qos/prio2buffer", exc)
    try:
        # "Port buffer size = N\nSpare buffer size = M\nBuffer\tSize\txoff_threshold\txon_threshold\n0\t..."
        for line in read_text(qos / "buffer_size").splitlines():
            parts = line.split()
            if len(parts) == 4 and all(p.isdigit() for p in parts):
                cfg.buffer_size[int(parts[0])] = int(parts[1])
    except FileNotFoundError:
        pass
    except (OSError, EmptyRead) as exc:
        _note_error(cfg, "qos/buffer_size", exc)
    try:
        text = read_text(qos / "trust").lower()
        cfg.trust = "dscp" if "dscp" in text else "pcp" if "pcp" in text else text.split()[-1]
        cfg.trust_source = "qos/trust"
    except FileNotFoundError:
        pass
    except (OSError, EmptyRead) as exc:
        _note_error(cfg, "qos/trust", exc)


def netdev_devices(sysfs_root: str | os.PathLike[str]) -> dict[str, str]:
    """netdev -> RDMA device, from class/infiniband/<dev>/ports/<p>/gid_attrs/ndevs."""
    from .infiniband import netdev_ports

    out: dict[str, str] = {}
    for device, netdev in netdev_ports(sysfs_root):
        out.setdefault(netdev, device)
    return out


def read_firmware(cfg: NetdevConfig, sysfs_root: str | os.PathLike[str]) -> None:
    if not cfg.device:
        return
    try:
        cfg.firmware = read_text(Path(sysfs_root) / "class" / "infiniband" / cfg.device / "fw_ver")
    except (OSError, EmptyRead) as exc:
        _note_error(cfg, f"class/infiniband/{cfg.device}/fw_ver", exc)


def pci_address(sysfs_root: str | os.PathLike[str], interface: str) -> str:
    """The PCI address of a netdev (the name of its debugfs mlx5 folder); "" when not a PCI device."""
    try:
        return os.path.basename(os.readlink(Path(sysfs_root) / "class" / "net" / interface / "device"))
    except OSError:
        return ""


def is_missing(exc: OSError) -> bool:
    return exc.errno in (errno.ENOENT, errno.ENODEV)
