"""Transceiver DOM (digital optical monitoring) from the module EEPROM, when permitted.

ETHTOOL_GMODULEINFO / ETHTOOL_GMODULEEEPROM are *not* on the kernel's list of ethtool commands
anyone may run (net/ethtool/ioctl.c): they need CAP_NET_ADMIN, and each read is an I2C access
to the module (milliseconds), so the source reads DOM only when enabled and permitted, and
re-reads it every `module_dom_interval`, not every poll.

Layouts (ethtool's qsfp.h / sfpdiag.c name the same offsets):
- SFF-8636 (QSFP+/QSFP28, ETH_MODULE_SFF_8636/8436), lower page 00h: temperature at 22-23
  (signed, 1/256 degC), rx power per lane at 34-41, tx bias at 42-49, tx power at 50-57
  (unsigned 16-bit: 0.1 uW, 2 uA, 0.1 uW).
- SFF-8472 (SFP+ with diagnostics, ETH_MODULE_SFF_8472): page A2h, at +256 in the ethtool map:
  temperature 96-97, tx bias 100-101, tx power 102-103, rx power 104-105 (one lane), internally
  calibrated only (A0h byte 92 bit 5); an externally calibrated module is reported, not guessed.
- SFF-8079 (SFP without diagnostics) and anything else (CMIS modules through this ioctl): no DOM.

No real EEPROM capture exists here: the parsing follows the specifications, `[unconfirmed]` on
hardware (docs/node-telemetry.md, "Link health").
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

ETHTOOL_GMODULEINFO = 0x42
ETHTOOL_GMODULEEEPROM = 0x43
ETH_MODULE_SFF_8079, ETH_MODULE_SFF_8472, ETH_MODULE_SFF_8636, ETH_MODULE_SFF_8436 = 1, 2, 3, 4
CAP_NET_ADMIN = 12

_U16 = struct.Struct(">H")
_S16 = struct.Struct(">h")
TENTH_MICROWATT = 1e-7  # watts
TWO_MICROAMP = 2e-6  # amperes

SFF8636_TEMP, SFF8636_RX_POWER, SFF8636_TX_BIAS, SFF8636_TX_POWER = 22, 34, 42, 50
SFF8472_A2 = 256
SFF8472_DOM_TYPE = 92  # in A0h: bit 6 DOM implemented, bit 5 internally calibrated
SFF8472_TEMP, SFF8472_BIAS, SFF8472_TX_POWER, SFF8472_RX_POWER = 96, 100, 102, 104


class NoDom(Exception):
    """This module has no DOM this reader can decode (the message says why)."""


@dataclass
class Dom:
    temperature: float  # degC
    rx_power: list[float] = field(default_factory=list)  # watts, per lane
    tx_power: list[float] = field(default_factory=list)
    tx_bias: list[float] = field(default_factory=list)  # amperes


def has_net_admin(status_path: str = "/proc/self/status") -> bool:
    """Whether this process's effective capabilities include CAP_NET_ADMIN."""
    try:
        with open(status_path) as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> CAP_NET_ADMIN & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def _lanes(data: bytes, start: int, scale: float) -> list[float]:
    return [_U16.unpack_from(data, start + 2 * lane)[0] * scale for lane in range(4)]


def parse_dom(module_type: int, data: bytes) -> Dom:
    """Decode the EEPROM bytes the kernel returned for a module of `module_type`."""
    if module_type in (ETH_MODULE_SFF_8636, ETH_MODULE_SFF_8436):
        if len(data) < SFF8636_TX_POWER + 8:
            raise NoDom(f"SFF-8636 EEPROM of {len(data)} bytes is too short")
        return Dom(_S16.unpack_from(data, SFF8636_TEMP)[0] / 256,
                   _lanes(data, SFF8636_RX_POWER, TENTH_MICROWATT),
                   _lanes(data, SFF8636_TX_POWER, TENTH_MICROWATT),
                   _lanes(data, SFF8636_TX_BIAS, TWO_MICROAMP))
    if module_type == ETH_MODULE_SFF_8472:
        if len(data) < SFF8472_A2 + SFF8472_RX_POWER + 2:
            raise NoDom(f"SFF-8472 EEPROM of {len(data)} bytes has no A2h page")
        dom_type = data[SFF8472_DOM_TYPE]
        if not dom_type & 0x40:
            raise NoDom("SFF-8472 module without digital diagnostics")
        if not dom_type & 0x20:
            raise NoDom("SFF-8472 module is externally calibrated (not decoded)")
        a2 = data[SFF8472_A2:]
        return Dom(_S16.unpack_from(a2, SFF8472_TEMP)[0] / 256,
                   [_U16.unpack_from(a2, SFF8472_RX_POWER)[0] * TENTH_MICROWATT],
                   [_U16.unpack_from(a2, SFF8472_TX_POWER)[0] * TENTH_MICROWATT],
                   [_U16.unpack_from(a2, SFF8472_BIAS)[0] * TWO_MICROAMP])
    raise NoDom(f"module type {module_type} has no DOM decoded here (SFF-8079 or CMIS)")
