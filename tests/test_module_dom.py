"""Transceiver DOM from the module EEPROM: SFF-8636/SFF-8472 decoding, the ioctl ABI, and the
source's behaviour with and without CAP_NET_ADMIN. Bytes are built from the specifications (no
real EEPROM capture exists here)."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import struct

import pytest

from helpers import render_store, samples_of, value
from infrapulse.sources.base import SourceContext
from infrapulse.sources.nic import ethtool as ethtool_mod
from infrapulse.sources.nic.ethtool import EthtoolCollector, EthtoolSource, FileStatsProvider
from infrapulse.sources.nic.ethtool_ioctl import IFREQ_SIZE, SIOCETHTOOL, EthtoolIoctl
from infrapulse.sources.nic.module_dom import (
    ETH_MODULE_SFF_8079,
    ETH_MODULE_SFF_8472,
    ETH_MODULE_SFF_8636,
    NoDom,
    has_net_admin,
    parse_dom,
)
from infrapulse.store import Store


def qsfp28(temp_raw: int = 0x2A80, rx=(8000, 7000, 0, 65535), bias=(3000, 3100, 3200, 3300),
           tx=(9000, 9100, 9200, 9300)) -> bytes:
    """An SFF-8636 lower page: temperature at 22 (1/256 degC), rx power 34-41, tx bias 42-49,
    tx power 50-57."""
    page = bytearray(256)
    page[0] = 0x11  # identifier: QSFP28
    struct.pack_into(">h", page, 22, temp_raw - (1 << 16) if temp_raw >= 1 << 15 else temp_raw)
    struct.pack_into(">4H", page, 34, *rx)
    struct.pack_into(">4H", page, 42, *bias)
    struct.pack_into(">4H", page, 50, *tx)
    return bytes(page)


def sfp(dom_type: int = 0x60) -> bytes:
    """SFF-8472: A0h (byte 92 = DOM type) then A2h at +256 (temp 96, bias 100, tx 102, rx 104)."""
    eeprom = bytearray(512)
    eeprom[92] = dom_type
    struct.pack_into(">hHHHH", eeprom, 256 + 96, 35 * 256 + 64, 0, 4000, 5000, 4500)
    return bytes(eeprom)


def test_sff8636_lanes_and_units():
    dom = parse_dom(ETH_MODULE_SFF_8636, qsfp28())
    assert dom.temperature == 42.5
    assert dom.rx_power == pytest.approx([8000e-7, 7000e-7, 0.0, 65535e-7])  # 0.1 uW units
    assert dom.tx_bias == pytest.approx([6e-3, 6.2e-3, 6.4e-3, 6.6e-3])  # 2 uA units
    assert dom.tx_power == pytest.approx([9000e-7, 9100e-7, 9200e-7, 9300e-7])
    assert parse_dom(ETH_MODULE_SFF_8636, qsfp28(temp_raw=0xFF00)).temperature == -1.0  # signed


def test_sff8472_internal_calibration_only():
    dom = parse_dom(ETH_MODULE_SFF_8472, sfp())
    assert (dom.temperature, dom.tx_bias, dom.tx_power, dom.rx_power) == (
        35.25, [pytest.approx(8e-3)], [pytest.approx(5e-4)], [pytest.approx(4.5e-4)])
    with pytest.raises(NoDom, match="externally calibrated"):
        parse_dom(ETH_MODULE_SFF_8472, sfp(dom_type=0x50))
    with pytest.raises(NoDom, match="without digital diagnostics"):
        parse_dom(ETH_MODULE_SFF_8472, sfp(dom_type=0x00))
    with pytest.raises(NoDom, match="no A2h page"):
        parse_dom(ETH_MODULE_SFF_8472, sfp()[:256])
    with pytest.raises(NoDom, match="SFF-8079 or CMIS"):
        parse_dom(ETH_MODULE_SFF_8079, bytes(256))


def test_cap_net_admin_from_proc_status(tmp_path):
    status = tmp_path / "status"
    status.write_text("Name:\tinfrapulse\nCapEff:\t0000000000001000\n")  # bit 12 only
    assert has_net_admin(str(status))
    status.write_text("Name:\tinfrapulse\nCapEff:\t0000000000000000\n")
    assert not has_net_admin(str(status))
    assert not has_net_admin(str(tmp_path / "missing"))


class ModuleKernel:
    """Answers ETHTOOL_GMODULEINFO / GMODULEEEPROM through the caller's buffers, by address."""

    def __init__(self, module_type: int, eeprom: bytes, error: int = 0) -> None:
        self.module_type, self.eeprom, self.error = module_type, eeprom, error
        self.calls: list[int] = []

    def __call__(self, fd: int, request: int, arg: bytes):
        assert request == SIOCETHTOOL and len(arg) == IFREQ_SIZE
        _, address = struct.unpack_from("16sP", arg)
        cmd = struct.unpack("=I", ctypes.string_at(address, 4))[0]
        self.calls.append(cmd)
        if self.error:
            raise OSError(self.error, os.strerror(self.error))
        if cmd == 0x42:
            ctypes.memmove(address + 4, struct.pack("=II", self.module_type, len(self.eeprom)), 8)
        elif cmd == 0x43:
            _, _, offset, length = struct.unpack("=IIII", ctypes.string_at(address, 16))
            data = self.eeprom[offset:offset + length]
            ctypes.memmove(address + 12, struct.pack("=I", len(data)), 4)
            ctypes.memmove(address + 16, data, len(data))
        return arg


def test_module_eeprom_through_the_ioctl_abi():
    kernel = ModuleKernel(ETH_MODULE_SFF_8636, qsfp28())
    module_type, data = EthtoolIoctl(kernel).module_eeprom("ens1f0np0")
    assert (module_type, data) == (ETH_MODULE_SFF_8636, qsfp28())
    assert kernel.calls == [0x42, 0x43]
    with pytest.raises(PermissionError):
        EthtoolIoctl(ModuleKernel(0, b"", error=errno.EPERM)).module_eeprom("ens1f0np0")


def collector(tmp_path, module_read, clock):
    (tmp_path / "ens1f0np0.json").write_text(json.dumps({"link_down_events_phy": 1}))
    return EthtoolCollector(FileStatsProvider(tmp_path), ["ens1f0np0"], tmp_path, clock=clock,
                            module_read=module_read, module_interval=60.0)


def collect(c: EthtoolCollector):
    store = Store()
    for result in c.collect():
        store.publish("ethtool", result.target, result.snapshot, 1e9)
    return render_store(store)


def test_dom_series_and_reread_interval(tmp_path):
    now = [0.0]
    reads = []

    def module_read(interface):
        reads.append(interface)
        return ETH_MODULE_SFF_8636, qsfp28(temp_raw=0x2A80 + 256 * len(reads))

    c = collector(tmp_path, module_read, lambda: now[0])
    v = collect(c)
    i = {"interface": "ens1f0np0"}
    assert value(v, "infrapulse_nic_module_temperature_celsius", **i) == 43.5
    assert samples_of(v, "infrapulse_nic_module_tx_bias_amperes") == {
        frozenset({**i, "lane": str(lane)}.items()): pytest.approx(b * 2e-6)
        for lane, b in enumerate((3000, 3100, 3200, 3300))}
    assert c.coverage("ens1f0np0")["module_dom"] == 13  # temperature + 3 x 4 lanes
    now[0] = 59.0
    assert value(collect(c), "infrapulse_nic_module_temperature_celsius", **i) == 43.5  # cached
    now[0] = 60.0
    assert value(collect(c), "infrapulse_nic_module_temperature_celsius", **i) == 44.5  # read again
    assert len(reads) == 2


def test_not_permitted_is_a_partial_error_and_no_module_is_not(tmp_path):
    def denied(interface):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    (result,) = collector(tmp_path, denied, lambda: 0.0).collect()
    assert result.partial_errors == [
        "ens1f0np0: module DOM needs CAP_NET_ADMIN (module_dom: true without it)"]
    no_module = EthtoolIoctl(ModuleKernel(0, b"", error=errno.EOPNOTSUPP)).module_eeprom
    c = collector(tmp_path, no_module, lambda: 0.0)
    (result,) = c.collect()
    assert result.partial_errors == [] and c.coverage("ens1f0np0")["module_dom"] == 0


def test_auto_without_cap_net_admin_is_off_and_says_so(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(ethtool_mod, "has_net_admin", lambda: False)
    cfg = EthtoolSource.CONFIG.validate({"interfaces": ["lo"]}, "sources.ethtool")
    assert cfg.module_dom == "auto"
    with caplog.at_level("INFO", logger="infrapulse.sources.ethtool"):
        source = EthtoolSource(cfg, SourceContext(store=Store(), interval=5.0))
    assert source.collector.module_read is None
    assert "module DOM off: the daemon has no CAP_NET_ADMIN" in caplog.text
    monkeypatch.setattr(ethtool_mod, "has_net_admin", lambda: True)
    source = EthtoolSource(cfg, SourceContext(store=Store(), interval=5.0))
    assert source.collector.module_read is not None
    off = EthtoolSource.CONFIG.validate({"interfaces": ["lo"], "module_dom": False}, "sources.ethtool")
    assert EthtoolSource(off, SourceContext(store=Store(), interval=5.0)).collector.module_read is None


def test_real_interfaces_without_modules_report_nothing():
    """eth0 here (virtio) has no module EEPROM: no DOM, no error, whatever the capabilities."""
    c = EthtoolCollector(ethtool_mod.IoctlStatsProvider("/sys"), ["eth0"], "/sys",
                         module_read=EthtoolIoctl().module_eeprom)
    for result in c.collect():
        assert not any("module" in e for e in result.partial_errors), result.partial_errors
