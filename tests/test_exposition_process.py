"""The process_* families: the same bytes as prometheus_client's ProcessCollector, fds counted by stat()."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client import ProcessCollector
from prometheus_client.exposition import choose_encoder
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS

from infrapulse.exposition.process import FastProcessCollector
from infrapulse.exposition.registry import reference_body
from infrapulse.exposition.style import style_of

MAX_OPEN_FILES = "Max open files            1024                 4096   files"


def fake_proc(root: Path, fds: int, limits: str = MAX_OPEN_FILES) -> Path:
    """A /proc with a `self` whose stat/limits/fd hold known values (a command name with a ')')."""
    (root / "self" / "fd").mkdir(parents=True)
    (root / "stat").write_text("cpu  1 2 3\nbtime 1764590000\n")
    after = ["S"] + [str(i) for i in range(1, 40)]
    after[11], after[12] = "12345", "678"  # utime, stime ticks
    after[19], after[20], after[21] = "987654", "1234567890", "4567"  # start, vsize, rss pages
    (root / "self" / "stat").write_text("4242 (py) thon) " + " ".join(after) + "\n")
    (root / "self" / "limits").write_text("Limit Soft Hard Units\n" + limits + "\n")
    for i in range(fds):
        (root / "self" / "fd" / str(i)).write_text("")
    return root


@pytest.mark.parametrize("accept", ["", OPENMETRICS])
def test_same_bytes_as_prometheus_client_on_a_fake_proc(tmp_path: Path, accept: str) -> None:
    proc = fake_proc(tmp_path, fds=7)
    style = style_of(choose_encoder(accept)[0])
    assert style is not None
    ours = FastProcessCollector(proc=str(proc))
    reference = ProcessCollector(proc=str(proc), registry=None)
    body = reference_body(ours.collect(), style)
    assert body == reference_body(reference.collect(), style)
    # a fake directory's size is no descriptor count: the listing is used
    assert not ours._size_counts_fds
    assert b"process_open_fds 7.0\n" in body
    assert b"process_max_fds 1024.0\n" in body
    assert b"process_virtual_memory_bytes 1.23456789e+09\n" in body
    # read again on the next scrape through the kept descriptor
    stat = proc / "self" / "stat"
    stat.write_text(stat.read_text().replace(" 1234567890 ", " 42 "))
    body = reference_body(ours.collect(), style)
    assert body == reference_body(reference.collect(), style)
    assert b"process_virtual_memory_bytes 42.0\n" in body
    ours.close()


def test_open_fds_of_this_process_match_the_listing() -> None:
    collector = FastProcessCollector()
    list(collector.collect())  # opens its descriptors of stat and limits, kept from then on
    if os.stat("/proc/self/fd").st_size > 0:  # Linux >= 6.2 reports the count as the size
        assert collector._size_counts_fds
    extra = [os.open(os.devnull, os.O_RDONLY) for _ in range(25)]
    try:
        counted = collector.open_fds()
        listed = len(os.listdir("/proc/self/fd"))  # prometheus_client's count
        assert counted == listed
        samples = {m.name: m.samples[0].value for m in collector.collect()}
        assert samples["process_open_fds"] == listed
    finally:
        for fd in extra:
            os.close(fd)
    assert collector.open_fds() == counted - 25


def test_limits_without_max_open_files_keeps_the_stat_families(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, fds=2, limits="Max processes 10 10 processes")
    names = [m.name for m in FastProcessCollector(proc=str(proc)).collect()]
    assert names == ["process_virtual_memory_bytes", "process_resident_memory_bytes",
                     "process_start_time_seconds", "process_cpu_seconds"]


@pytest.mark.parametrize("accept", ["", OPENMETRICS])
def test_the_registry_writes_the_values_through_kept_shapes_as_prometheus_client_does(
        tmp_path: Path, accept: str) -> None:
    """The first render of each family goes through prometheus_client and keeps its shape; later
    renders write only the values (no Metric objects): the same bytes as ProcessCollector's."""
    from infrapulse.exposition.registry import ExpositionRegistry, render_body

    proc = fake_proc(tmp_path, fds=7)
    registry = ExpositionRegistry(auto_describe=False)
    ours = FastProcessCollector(proc=str(proc))
    registry.register(ours)
    reference = ProcessCollector(proc=str(proc), registry=None)
    encoder = choose_encoder(accept)[0]
    stat = proc / "self" / "stat"
    for vsize in ("1234567890", "42", "7e3"):
        fields = stat.read_text().split(" ")
        fields[23] = vsize  # after "4242 (py) thon)": field 23 of stat(5)
        stat.write_text(" ".join(fields))
        body = render_body(registry, encoder)
        assert body == reference_body(reference.collect(), style_of(encoder)) + (
            b"# EOF\n" if accept else b"")
    assert b"process_virtual_memory_bytes 7000.0\n" in body
    shapes = registry._unlabelled._shapes  # noqa: SLF001
    assert len(shapes) == 6 and None not in shapes.values()
    ours.close()
