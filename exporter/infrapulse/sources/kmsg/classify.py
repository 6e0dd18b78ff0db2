"""A kernel log message -> the events it reports: (kind, PCI address, code, severity).

Every label value is taken from a bounded vocabulary (a kind below, an XID/SXid number, an AER
error type and severity) or is a PCI address; no raw log text, pid or process name ever
reaches a label. One line is one event: a driver that prints one fault on several lines (Xid 13
ESR lines, SXid `Fatal` / `Severity` / `Data` lines, mlx5 `wait_func` after
`wait_func_handle_exec_timeout`) counts each line, since the log cannot say which belong together.
Detail lines that repeat an event (AER `... error received`, `device [..] error status`, bit
names; mlx5 `print_health_info` fields; `TX timeout on queue`) count nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ... import xid

XID = "xid"
SXID = "sxid"
FALLEN_OFF_BUS = "gpu_fallen_off_bus"
MLX5_HEALTH = "mlx5_health_compromised"
MLX5_FW_ERROR = "mlx5_fw_error"
MLX5_CMD_TIMEOUT = "mlx5_cmd_timeout"
CQE_ERROR = "cqe_error"
TX_TIMEOUT = "tx_timeout"
LINK_UP = "link_up"
LINK_DOWN = "link_down"
LINK_INIT = "link_init"
MODULE_PLUGGED = "module_plugged"
MODULE_UNPLUGGED = "module_unplugged"
MODULE_ERROR = "module_error"
PCIE_AER = "pcie_aer"
BNXT_ERROR = "bnxt_error"

# kind -> the fixed summary of the last-event info series (with the code/severity filled in).
SUMMARIES = {
    XID: "Xid {code}: {meaning}",
    SXID: "NVSwitch SXid {code}",
    FALLEN_OFF_BUS: "GPU has fallen off the bus",
    MLX5_HEALTH: "mlx5 health compromised (health counter miss)",
    MLX5_FW_ERROR: "mlx5 firmware health issue ({severity})",
    MLX5_CMD_TIMEOUT: "mlx5 firmware command timeout",
    CQE_ERROR: "completion queue error (CQE)",
    TX_TIMEOUT: "netdev TX timeout",
    LINK_UP: "link up",
    LINK_DOWN: "link down",
    LINK_INIT: "IB port link INIT/ARM",
    MODULE_PLUGGED: "port module: cable plugged",
    MODULE_UNPLUGGED: "port module: cable unplugged",
    MODULE_ERROR: "port module error",
    PCIE_AER: "PCIe AER {severity} {code} error",
    BNXT_ERROR: "bnxt firmware command or RDMA error",
}
SUMMARY_MAX = 80


@dataclass(frozen=True)
class Event:
    kind: str
    pci_address: str  # 0000:b3:00.0, "" where the line names no PCI function
    code: str = ""  # XID / SXid number, AER error type
    severity: str = ""  # XID class (xid.py), AER severity, mlx5 health severity, SXid fatal/non_fatal

    def summary(self) -> str:
        meaning = ""
        if self.kind == XID and self.code.isdigit():
            known = xid.BY_CODE.get(int(self.code))
            meaning = known.meaning if known else "unlisted XID"
        text = SUMMARIES[self.kind].format(code=self.code, severity=self.severity or "unknown",
                                           meaning=meaning)
        return text[:SUMMARY_MAX]


_PCI = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
_XID = re.compile(rf"NVRM: Xid \(PCI:({_PCI})\): (\d+)")
_SXID = re.compile(rf"SXid \(PCI:({_PCI})\): (\d+)")
_SXID_SEVERITY = re.compile(r", (Fatal|Non-fatal),", re.I)
# Legacy `GPU at 0000:01:00.0 has fallen off the bus`, `GPU 0000:09:00.0: GPU has fallen off the
# bus` and the 570 multi-line `The NVIDIA GPU 0000:b3:00.0 / ... / fallen off the bus`.
_FALLEN = re.compile(rf"NVRM: (?:The NVIDIA )?GPU (?:at )?({_PCI})\b.*?fallen off the bus", re.S)
# `<driver> <pci>[ <netdev>]: <text>`: how dev_* and netdev_* messages start.
_DEV = re.compile(rf"^(\S+) ({_PCI})(?: (\S+))?: (.*)$", re.S)
_AER = re.compile(r"PCIe Bus Error: severity=([^,]+), type=([^,]+)")
_MLX5_SEVERITY = re.compile(r"severity\(\d+\) (\w+)")
_WATCHDOG = re.compile(r"NETDEV WATCHDOG: ")
_BNXT_RE = re.compile(r"^infiniband bnxt_re\d+: (?:Failed|.*error)", re.I)

_AER_SEVERITY = {"corrected": "corrected", "correctable": "corrected",
                 "uncorrected (non-fatal)": "uncorrected_nonfatal", "uncorrectable (non-fatal)":
                 "uncorrected_nonfatal", "uncorrected (fatal)": "uncorrected_fatal",
                 "uncorrectable (fatal)": "uncorrected_fatal"}
_AER_TYPE = {"physical layer": "physical_layer", "data link layer": "data_link_layer",
             "transaction layer": "transaction_layer", "inaccessible": "inaccessible"}


def pci_function(address: str) -> str:
    """NVRM's `0000:9b:00` (no function) -> `0000:9b:00.0`, lower case."""
    address = address.lower()
    return address if "." in address else address + ".0"


def classify(message: str) -> list[Event]:
    """The events one kernel message reports ([] for most messages)."""
    if "NVRM" in message:
        return _nvrm(message)
    if "SXid" in message:
        m = _SXID.search(message)
        if not m:
            return []
        # The driver marks the line that reports the fault `Fatal` / `Non-fatal`; its `Severity`
        # and `Data` detail lines carry neither ("").
        fatal = _SXID_SEVERITY.match(message, m.end())
        severity = fatal.group(1).lower().replace("-", "_") if fatal else ""
        return [Event(SXID, pci_function(m.group(1)), m.group(2), severity)]
    if "PCIe Bus Error" in message:
        return _aer(message)
    if _WATCHDOG.search(message):  # names a netdev, not a PCI function
        return [Event(TX_TIMEOUT, "")]
    if message.startswith("infiniband bnxt_re") and _BNXT_RE.match(message):
        return [Event(BNXT_ERROR, "")]
    m = _DEV.match(message)
    if not m:
        return []
    driver, address, text = m.group(1), pci_function(m.group(2)), m.group(4)
    if driver == "mlx5_core":
        return _mlx5(address, text)
    if driver.startswith("bnxt_"):
        if "QPLIB:" in text or "error" in text.lower():
            return [Event(BNXT_ERROR, address)]
        return _netdev_link(address, text)
    return []


def _nvrm(message: str) -> list[Event]:
    m = _XID.search(message)
    if m:
        code = int(m.group(2))
        return [Event(XID, pci_function(m.group(1)), str(code), xid.xid_class(code))]
    m = _FALLEN.search(message)
    if m:
        return [Event(FALLEN_OFF_BUS, pci_function(m.group(1)))]
    return []


def _aer(message: str) -> list[Event]:
    m = _AER.search(message)
    dev = _DEV.match(message)
    if not m or not dev:
        return []
    severity = _AER_SEVERITY.get(m.group(1).strip().lower(), "unknown")
    kind = _AER_TYPE.get(m.group(2).strip().lower(), "unknown")
    return [Event(PCIE_AER, pci_function(dev.group(2)), kind, severity)]


def _mlx5(address: str, text: str) -> list[Event]:
    if "health compromised" in text:
        return [Event(MLX5_HEALTH, address)]
    if "Health issue observed" in text or "fw assert" in text.lower():
        m = _MLX5_SEVERITY.search(text)
        return [Event(MLX5_FW_ERROR, address, "", m.group(1).lower() if m else "")]
    if "wait_func" in text and ("No done completion" in text or "timeout" in text):
        return [Event(MLX5_CMD_TIMEOUT, address)]
    if "CQE error" in text or "CQ error on CQN" in text:
        return [Event(CQE_ERROR, address)]
    if "TX timeout detected" in text:
        return [Event(TX_TIMEOUT, address)]
    if text.startswith("Port module event"):
        if "Cable unplugged" in text:
            return [Event(MODULE_UNPLUGGED, address)]
        if "Cable plugged" in text:
            return [Event(MODULE_PLUGGED, address)]
        return [Event(MODULE_ERROR, address)]
    return _netdev_link(address, text)


def _netdev_link(address: str, text: str) -> list[Event]:
    # netdev `Link up` / `Link down`; IB `Port: 1 Link ACTIVE` / `DOWN` / `INIT` / `ARM`.
    state = text.rsplit("Link ", 1)[-1].strip().lower() if "Link " in text else ""
    if state in ("up", "active"):
        return [Event(LINK_UP, address)]
    if state == "down":
        return [Event(LINK_DOWN, address)]
    if state in ("init", "arm", "armed"):
        return [Event(LINK_INIT, address)]
    return []
