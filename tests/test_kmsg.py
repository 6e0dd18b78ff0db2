"""The kmsg source on every real kernel-log capture in ../shared/real/kmsg (read in place), value by
value; the reader's cursor across two source instances; a missing log is target down."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import yaml

from helpers import real
from infrapulse import config as config_mod
from infrapulse.sources.base import SourceContext
from infrapulse.sources.kmsg import families as F
from infrapulse.sources.kmsg.classify import SUMMARY_MAX, Event, classify
from infrapulse.sources.kmsg.records import Record, parse, parse_lines
from infrapulse.sources.kmsg.source import KmsgSource
from infrapulse.store import Store

AER = "pcie_aer"
DLL, PHY = "data_link_layer", "physical_layer"

# file -> {(kind, pci_address, code, severity): count}: every event the capture holds, nothing else.
EXPECTED: dict[str, dict[tuple[str, str, str, str], int]] = {
    "aer-correctable-multi-ctime-dasharo-pr815.txt": {
        (AER, "0000:00:1d.3", DLL, "corrected"): 1, (AER, "0000:06:00.0", PHY, "corrected"): 1},
    "aer-corrected-dll-timeout-legacy-coreboot-issue2.txt": {(AER, "0000:00:1c.1", DLL, "corrected"): 4},
    "aer-corrected-rxerr-journal-gsconnect-issue1052.txt": {(AER, "0000:00:1c.5", PHY, "corrected"): 3},
    # bnxt_re0 names no PCI function on its line
    "bnxt_en-qplib-bnxt_re-linux-nvme-2019.txt": {
        ("bnxt_error", "0000:19:00.0", "", ""): 1, ("bnxt_error", "", "", ""): 1},
    "kmsg-raw-devkmsg-nvswitch-gpud-fixture.txt": {},  # nvswitch open, calico link-ready: no fault
    # 5 `No done completion` + 3 `wait_func ... timeout` lines
    "mlx5-cmd-exec-timeout-pdsh-ucx-issue7738.txt": {("mlx5_cmd_timeout", "0000:61:00.0", "", ""): 8},
    "mlx5-health-fw-assert-cx6dx-qemu-devel-2025.txt": {
        **{("mlx5_health_compromised", f"0000:0d:00.{fn}", "", ""): 1 for fn in range(6)},
        ("mlx5_fw_error", "0000:0d:00.0", "", "error"): 1, ("mlx5_fw_error", "0000:0d:00.1", "", "error"): 1},
    "mlx5-ib-link-init-active-journal-gpud-pr1209.txt": {
        ("link_init", "0000:ab:00.0", "", ""): 1, ("link_up", "0000:ab:00.0", "", ""): 1},
    "mlx5-port-module-cable-plugged-linkup-blog.txt": {
        ("module_plugged", "0000:01:00.0", "", ""): 1, ("module_plugged", "0000:01:00.1", "", ""): 1,
        ("link_up", "0000:01:00.0", "", ""): 1, ("link_up", "0000:01:00.1", "", ""): 1},
    "mlx5e-tx-timeout-kstack-stable-5.10-commit.txt": {("tx_timeout", "0000:08:00.1", "", ""): 1},
    "nvrm-fallen-off-bus-570-nvsentinel-issue155.txt": {("gpu_fallen_off_bus", "0000:b3:00.0", "", ""): 1},
    "nvrm-fallen-off-bus-legacy-bumblebee-issue554.txt": {("gpu_fallen_off_bus", "0000:01:00.0", "", ""): 2},
    "nvrm-xid119-gsp-ctime-gpud-fixture.txt": {("xid", "0000:9b:00.0", "119", "critical"): 5},
    "nvrm-xid13-isodecode-gpud-fixture.txt": {("xid", "0000:38:00.0", "13", "application"): 16},
    "nvrm-xid31-32-nopid-bumblebee-issue677.txt": {
        ("xid", "0000:01:00.0", "32", "application"): 2, ("xid", "0000:01:00.0", "31", "application"): 1},
    "nvrm-xid45-after-149-590-ogkm-issue1150.txt": {
        ("xid", "0000:dc:00.0", "45", "application"): 2, ("xid", "0000:ed:00.0", "45", "application"): 2,
        ("xid", "0000:ba:00.0", "45", "application"): 2, ("xid", "0000:97:00.0", "45", "application"): 1},
    # Xid 79 and the driver's own `GPU has fallen off the bus` line after it: one each
    "nvrm-xid79-pid0-aer-dll-nvidia-docker-issue1553.txt": {
        ("xid", "0000:09:00.0", "79", "critical"): 1, ("gpu_fallen_off_bus", "0000:09:00.0", "", ""): 1,
        (AER, "0000:00:01.1", DLL, "corrected"): 1},
    "nvrm-xid79-sxid20034-gpud-readme.txt": {
        ("xid", "0000:91:00.0", "79", "critical"): 1, ("gpu_fallen_off_bus", "0000:91:00.0", "", ""): 1,
        # the `Fatal` line reports the fault; its `Severity` / `Data` detail lines say neither
        ("sxid", "0000:06:00.0", "20034", "fatal"): 1, ("sxid", "0000:05:00.0", "20034", "fatal"): 2,
        ("sxid", "0000:05:00.0", "20034", ""): 2, ("sxid", "0000:07:00.0", "20034", "fatal"): 1,
        ("sxid", "0000:07:00.0", "20034", ""): 2},
    "nvswitch-sxid12028-isodecode-gpud-pr338.txt": {("sxid", "0000:84:00.0", "12028", ""): 1},
}
RECORDS = {  # records per capture: lines, less continuation lines folded into the record above
    "kmsg-raw-devkmsg-nvswitch-gpud-fixture.txt": 47, "nvrm-fallen-off-bus-570-nvsentinel-issue155.txt": 3,
    "nvrm-xid79-pid0-aer-dll-nvidia-docker-issue1553.txt": 16, "nvrm-xid119-gsp-ctime-gpud-fixture.txt": 43,
}


def _source(path: Path | str, state_dir: Path | None = None, **overrides: object) -> tuple[KmsgSource, Store]:
    section = {"enabled": True, "path": str(path), "boot_id_path": "", **overrides}
    cfg = config_mod.load_text(yaml.safe_dump({"sources": {"kmsg": section}}), "<test>")
    store = Store()
    ctx = SourceContext(store=store, interval=5.0, state_dir=str(state_dir) if state_dir else "")
    return KmsgSource(cfg.sources["kmsg"], ctx), store


def _events(snapshot) -> dict[tuple[str, ...], float]:
    return dict(snapshot.series.get(F.EVENTS.name, {}))


def test_every_capture_is_in_the_table() -> None:
    on_disk = {p.name for p in real("kmsg").glob("*.txt")}
    assert on_disk == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_capture_counts_each_event_on_its_device(name: str) -> None:
    path = real("kmsg", name)
    source, _ = _source(path)
    [result] = await source.collect()
    assert result.reason == "ok" and result.snapshot is not None
    assert _events(result.snapshot) == {k: float(v) for k, v in EXPECTED[name].items()}
    lines = path.read_text().splitlines()
    records = result.snapshot.get(F.RECORDS.name, ())
    assert records == float(RECORDS.get(name, len([line for line in lines if line.strip()])))
    # No label value carries log text: only the vocabulary, numbers and PCI addresses.
    for _kind, address, code, _severity in _events(result.snapshot):
        assert address == "" or len(address) == 12
        assert code.isdigit() or code in ("", DLL, PHY)
    # The last-event series: one per device, a fixed summary, never longer than 80 characters.
    last = result.snapshot.series.get(F.LAST_EVENT.name, {})
    assert {row[0] for row in last} == {k[1] for k in EXPECTED[name]}
    assert all(len(row[3]) <= SUMMARY_MAX and "pid" not in row[3] for row in last)
    # A second pass reads nothing new: the counters stay.
    [again] = await source.collect()
    assert _events(again.snapshot) == _events(result.snapshot)


async def test_the_last_event_summary_names_the_xid_from_the_table() -> None:
    source, _ = _source(real("kmsg", "nvrm-xid79-sxid20034-gpud-readme.txt"))
    [result] = await source.collect()
    last = {row[0]: row for row in result.snapshot.series[F.LAST_EVENT.name]}
    # The Xid line comes first, the driver's fallen-off-the-bus line after it: that one is last.
    assert last["0000:91:00.0"] == ("0000:91:00.0", "gpu_fallen_off_bus", "", "GPU has fallen off the bus")
    assert last["0000:05:00.0"] == ("0000:05:00.0", "sxid", "20034", "NVSwitch SXid 20034")
    source, _ = _source(real("kmsg", "nvrm-xid119-gsp-ctime-gpud-fixture.txt"))
    [result] = await source.collect()
    assert list(result.snapshot.series[F.LAST_EVENT.name]) == [
        ("0000:9b:00.0", "xid", "119", "Xid 119: GSP firmware RPC timeout")]


def _triple(record: Record) -> tuple[int | None, int | None, str]:
    return record.priority, record.seq, record.message


def test_record_forms() -> None:
    assert _triple(parse("6,3964,206764307,-;nvidia-nvswitch2: open (major=510)")) == (
        6, 3964, "nvidia-nvswitch2: open (major=510)")
    assert parse("[   49.261458] NVRM: GPU at 0000:01:00.0 has fallen off the bus.").message == \
        "NVRM: GPU at 0000:01:00.0 has fallen off the bus."
    assert parse("[Sun Feb 23 16:24:18 2025] NVRM: x").message == "NVRM: x"
    assert _triple(parse("kern  :err   : 2025-01-25T10:34:54,859532+00:00 nvidia-nvswitch1: y")) == (
        3, None, "nvidia-nvswitch1: y")
    assert parse("фев 12 00:48:02 kernel: pcieport z").message == "pcieport z"
    assert parse("Feb 14 05:03:41 host-1 kernel: mlx5_core w").message == "mlx5_core w"
    assert parse("Feb 14 05:03:41 host-1 systemd[1]: Started x.").kernel is False
    assert parse("kernel: NVRM: v").message == "NVRM: v"
    assert parse("b1360: [14280.445220] mlx5_core u").message == "mlx5_core u"
    assert parse(" mlx5_core 0000:08:00.1 enp8s0f1: TX timeout detected").message.startswith("mlx5_core")
    # a \x0a inside a raw record is the kernel's newline
    assert parse(r"4,10,5,-;NVRM: The NVIDIA GPU 0000:b3:00.0\x0aNVRM: fallen off the bus").message == \
        "NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: fallen off the bus"
    lines = real("kmsg", "nvrm-fallen-off-bus-570-nvsentinel-issue155.txt").read_text().splitlines()
    assert len(parse_lines(lines)) == 3


def test_unlisted_and_uncorrected_shapes() -> None:
    # The 6.x uncorrected wording; an XID that is not in the table is class `other`.
    assert classify("pcieport 0000:00:03.1: PCIe Bus Error: severity=Uncorrected (Fatal), "
                    "type=Transaction Layer, (Requester ID)") == [
        Event("pcie_aer", "0000:00:03.1", "transaction_layer", "uncorrected_fatal")]
    assert classify("NVRM: Xid (PCI:0000:01:00): 999, pid=1, name=x, y") == [
        Event("xid", "0000:01:00.0", "999", "other")]
    assert classify("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 11004, Non-fatal, Link 03 ingress") == [
        Event("sxid", "0000:05:00.0", "11004", "non_fatal")]


def _raw(seq_from: int, seq_to: int) -> str:
    return "".join(f"4,{s},{s * 1000},-;NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.\n"
                   for s in range(seq_from, seq_to + 1))


async def test_cursor_survives_a_restart_without_double_counting(tmp_path: Path) -> None:
    log, state = tmp_path / "kmsg.log", tmp_path / "state"
    log.write_text(_raw(1, 3))
    first, _ = _source(log, state)
    [r1] = await first.collect()
    assert _events(r1.snapshot) == {("xid", "0000:3b:00.0", "79", "critical"): 3.0}
    await first.close()
    cursor = state / "kmsg" / "cursor.json"
    assert yaml.safe_load(cursor.read_text()) == {"seq": 3, "boot_id": ""}
    with log.open("a") as f:
        f.write(_raw(4, 5))
    # A new instance reads the whole file again: records 1..3 are at or below the cursor.
    second, _ = _source(log, state)
    [r2] = await second.collect()
    assert _events(r2.snapshot) == {("xid", "0000:3b:00.0", "79", "critical"): 2.0}
    assert r2.snapshot.get(F.RECORDS.name, ()) == 2.0
    # Followed: what is appended later is read on the next pass.
    with log.open("a") as f:
        f.write(_raw(6, 6))
    [r3] = await second.collect()
    assert _events(r3.snapshot) == {("xid", "0000:3b:00.0", "79", "critical"): 3.0}
    assert yaml.safe_load(cursor.read_text())["seq"] == 6


async def test_a_cursor_from_another_boot_is_not_trusted(tmp_path: Path) -> None:
    log, state, boot = tmp_path / "kmsg.log", tmp_path / "state", tmp_path / "boot_id"
    log.write_text(_raw(1, 4))
    boot.write_text("boot-a\n")
    first, _ = _source(log, state, boot_id_path=str(boot))
    await first.collect()
    boot.write_text("boot-b\n")  # rebooted: the new log's seq 1..4 are new records
    second, _ = _source(log, state, boot_id_path=str(boot))
    [result] = await second.collect()
    assert _events(result.snapshot) == {("xid", "0000:3b:00.0", "79", "critical"): 4.0}


async def test_records_per_cycle_are_bounded(tmp_path: Path) -> None:
    log = tmp_path / "kmsg.log"
    log.write_text(_raw(1, 5))
    source, _ = _source(log, max_records_per_cycle=2)
    counts = []
    for _ in range(4):
        [result] = await source.collect()
        counts.append(result.snapshot.get(F.RECORDS.name, ()))
    assert counts == [2.0, 4.0, 5.0, 5.0]


async def test_a_sequence_going_backwards_starts_the_cursor_over(tmp_path: Path) -> None:
    log = tmp_path / "kmsg.log"
    log.write_text(_raw(7, 8) + _raw(1, 2))
    source, _ = _source(log)
    [result] = await source.collect()
    assert _events(result.snapshot) == {("xid", "0000:3b:00.0", "79", "critical"): 4.0}
    assert result.snapshot.get(F.CURSOR_RESETS.name, ()) == 1.0


async def test_a_fifo_is_followed(tmp_path: Path) -> None:
    fifo = tmp_path / "kmsg.fifo"
    os.mkfifo(fifo)
    writer_r = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # lets the writer open without blocking
    writer = os.open(fifo, os.O_WRONLY)
    try:
        source, _ = _source(fifo)
        [empty] = await source.collect()
        assert _events(empty.snapshot) == {}
        os.write(writer, _raw(1, 2).encode())
        [result] = await source.collect()
        assert _events(result.snapshot) == {("xid", "0000:3b:00.0", "79", "critical"): 2.0}
    finally:
        await source.close()
        os.close(writer)
        os.close(writer_r)


@pytest.mark.parametrize("mode", ["missing", "dangling_link", "directory"])
async def test_an_unreadable_log_is_target_down_naming_the_path(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "kmsg"
    if mode == "dangling_link":  # exists() is false, open fails with ENOENT even for root
        path.symlink_to(tmp_path / "gone")
    if mode == "directory":  # opens, then read(2) fails (EISDIR): the read path's error
        path.mkdir()
    source, store = _source(path)
    await source.poll_once()
    status = store.status_of("kmsg", "kmsg")
    assert (status.up, status.reason) == (False, "unreadable")
    assert str(path) in status.message


async def test_the_demo_part_records_read_as_events(tmp_path: Path) -> None:
    from infrapulse.simulate import kmsg as demo
    from infrapulse.simulate.demo import DemoContext
    from infrapulse.simulate.scenarios import ScenarioBoard

    part = await demo.demo_part(DemoContext(workdir=tmp_path, scenarios=ScenarioBoard()))
    source, _ = _source(part.sources["kmsg"]["path"])
    [result] = await source.collect()
    await part.close()
    assert _events(result.snapshot) == {
        ("module_plugged", "0000:0c:00.0", "", ""): 1.0, ("link_up", "0000:0c:00.0", "", ""): 2.0,
        (AER, "0000:00:1c.1", DLL, "corrected"): 1.0, ("xid", "0000:38:00.0", "13", "application"): 1.0,
        ("mlx5_cmd_timeout", "0000:0d:00.0", "", ""): 1.0}
    assert result.snapshot.get(F.RECORDS.name, ()) == float(len(demo.RECORDS))


async def test_the_demo_gpu_scenarios_write_the_drivers_lines_once_per_start(tmp_path: Path) -> None:
    """`xid` logs its GPU's XID 79 and "fallen off the bus" (as a real node does beside NVML's
    event), `xid-app-error` its XID 13; each once per start, read by the source as new records."""
    from infrapulse.simulate import kmsg as demo
    from infrapulse.simulate.demo import DemoContext
    from infrapulse.simulate.scenarios import ScenarioBoard

    board = ScenarioBoard()
    part = await demo.demo_part(DemoContext(workdir=tmp_path, scenarios=board))
    path = Path(part.sources["kmsg"]["path"])
    await part.close()
    follower = demo.KernelLogScenarios(path, board, demo._scenario_gpus())
    source, _ = _source(path)
    [before] = await source.collect()
    board.activate("xid")
    board.activate("xid-app-error")
    follower.step()
    follower.step()  # still active: nothing more
    board.deactivate("xid")
    follower.step()
    board.activate("xid")
    follower.step()  # started again: logged again
    [after] = await source.collect()
    grown = {k: v - _events(before.snapshot).get(k, 0.0) for k, v in _events(after.snapshot).items()}
    assert {k: v for k, v in grown.items() if v} == {
        ("gpu_fallen_off_bus", "0000:5d:00.0", "", ""): 2.0, ("xid", "0000:5d:00.0", "79", "critical"): 2.0,
        ("xid", "0000:ab:00.0", "13", "application"): 1.0}
    assert after.snapshot.get(F.RECORDS.name, ()) == float(len(demo.RECORDS) + 7)


DEV_KMSG = Path("/dev/kmsg")


@pytest.mark.skipif(not os.access(DEV_KMSG, os.R_OK), reason="no readable /dev/kmsg on this host")
async def test_the_real_dev_kmsg_reads_one_record_per_read_with_a_cursor(tmp_path: Path) -> None:
    """The character-device path on this host's own kernel log (read only: nothing is written to
    it). EPIPE (an overrun) cannot be caused without flooding the log: a fake device exercises it
    (test_an_overrun_epipe_is_counted_once_and_the_records_after_it_are_read)."""
    first, _ = _source(DEV_KMSG, tmp_path, boot_id_path="/proc/sys/kernel/random/boot_id")
    batch = first.reader.read(100000)
    await first.close()
    seqs = [r.seq for r in batch.records]
    assert seqs and all(isinstance(s, int) for s in seqs) and seqs == sorted(seqs)
    assert all(r.priority is not None and 0 <= r.priority <= 7 for r in batch.records)
    first.reader.save_cursor()
    cursor = yaml.safe_load((tmp_path / "kmsg" / "cursor.json").read_text())
    assert cursor["seq"] == seqs[-1]
    # A second reader skips everything up to the cursor: only records logged since (if any).
    second, _ = _source(DEV_KMSG, tmp_path, boot_id_path="/proc/sys/kernel/random/boot_id")
    again = second.reader.read(100000)
    await second.close()
    assert again.skipped > 0  # (not len(seqs): the ring buffer may have dropped old ones since)
    assert all(r.seq is not None and r.seq > seqs[-1] for r in again.records)


class _FakeDevKmsg:
    """A /dev/kmsg-like character device: one record per read(2), EPIPE where the ring buffer
    overwrote records, EAGAIN when caught up."""

    def __init__(self, script: list[bytes | int]) -> None:
        self.script = list(script)

    def read(self, fd: int, size: int) -> bytes:
        if not self.script:
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        step = self.script.pop(0)
        if isinstance(step, int):
            raise OSError(step, os.strerror(step))
        return step


def _xid_record(seq: int) -> bytes:
    text = f"4,{seq},{seq * 1000},-;NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus."
    return text.encode()


async def test_an_overrun_epipe_is_counted_once_and_the_records_after_it_are_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from infrapulse.sources.kmsg import reader as reader_mod

    # Records 1-2, then the ring buffer overwrote 3-9 (EPIPE), then the oldest still there: 10-12.
    fake = _FakeDevKmsg([_xid_record(1), _xid_record(2), errno.EPIPE,
                         _xid_record(10), _xid_record(11), _xid_record(12)])
    log = tmp_path / "kmsg"
    log.write_text("")
    source, _ = _source(log)
    source.reader.open()
    source.reader._device = True  # read as the character device: one record per read(2)
    monkeypatch.setattr(reader_mod.os, "read", fake.read)
    [result] = await source.collect()
    assert result.reason == "ok"
    assert result.snapshot.get(F.OVERRUNS.name, ()) == 1.0
    assert result.snapshot.get(F.RECORDS.name, ()) == 5.0
    assert _events(result.snapshot) == {("xid", "0000:3b:00.0", "79", "critical"): 5.0}
    assert source.reader.cursor == 12
    # Caught up (EAGAIN): nothing more, the overrun is not counted again.
    fake.script = [_xid_record(13)]
    [again] = await source.collect()
    assert again.snapshot.get(F.OVERRUNS.name, ()) == 1.0
    assert again.snapshot.get(F.RECORDS.name, ()) == 6.0
    assert _events(again.snapshot) == {("xid", "0000:3b:00.0", "79", "critical"): 6.0}
