"""Property tests for every parser that reads bytes it does not control.

sysfs counter/state/rate files, ethtool ioctl buffers, Prometheus expositions (and the serving and
DCGM mappings on top of them), gNMI paths and values. Each property is "decodes, or fails with the
documented error, never anything else", plus round trips and agreement with a reference for valid
input. Example counts are bounded so the file stays a CI test; fuzz/ holds atheris harnesses for
long local runs.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import json
import math
import re
import string
import struct
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, localcontext
from pathlib import Path

import pytest
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from pygnmi.spec.v080 import gnmi_pb2 as pb

from infrapulse.config import ConfigError, load_text
from infrapulse.scrape import parse_headers_text, redact_url
from infrapulse.sources.gnmi import wire as gnmi_wire
from infrapulse.sources.gnmi.families import MALFORMED, STATUS_FAMILIES, UPDATES
from infrapulse.sources.gnmi.ingest import SwitchState
from infrapulse.sources.gnmi.paths import (
    PathPattern,
    PathSyntaxError,
    format_path,
    from_proto,
    parse_path,
    strip_module,
    to_proto,
)
from infrapulse.sources.gnmi.profile import load_profiles
from infrapulse.sources.gnmi.values import MalformedValue, flatten_json, load_json, scalar, to_number
from infrapulse.sources.gpu.dcgm import FIELD_MAP, FP64_BLANK, INT64_BLANK, DcgmMapper
from infrapulse.sources.nic import ethtool as eth
from infrapulse.sources.nic import families as fam
from infrapulse.sources.nic import infiniband as ib
from infrapulse.sources.nic.ethtool_ioctl import (
    ETH_GSTRING_LEN,
    ETHTOOL_GSSET_INFO,
    ETHTOOL_GSTATS,
    ETHTOOL_GSTRINGS,
    EthtoolIoctl,
    StatSetChanged,
    StatsNotSupported,
)
from infrapulse.sources.serving import normalize as norm
from infrapulse.store import Histogram
from infrapulse.textparse import ParseError, parse

FUZZ = settings(max_examples=250, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SHORT = settings(FUZZ, max_examples=80)


# == (a) sysfs values ===========================================================================

_digits = st.integers(0, 2**64 - 1)


@FUZZ
@given(st.binary(max_size=ib.READ_SIZE))
def test_state_text_is_an_int_or_value_error(raw):
    try:
        value = ib.parse_state(raw)
    except ValueError:
        return
    assert isinstance(value, int)


@FUZZ
@given(st.integers(0, 255), st.text(string.ascii_letters + "_ ", min_size=1, max_size=20))
def test_state_round_trip(number, name):
    assert ib.parse_state(f"{number}: {name}\n".encode()) == number


@FUZZ
@given(st.binary(max_size=ib.READ_SIZE))
def test_rate_text_is_a_rate_or_value_error(raw):
    try:
        value = ib.parse_rate(raw)
    except ValueError:
        return
    assert math.isfinite(value) and value >= 0


@FUZZ
@given(st.decimals(min_value=0, max_value=10**4, places=3, allow_nan=False, allow_infinity=False),
       st.sampled_from([1, 2, 4, 8, 12]), st.sampled_from(["SDR", "EDR", "HDR", "NDR", "XDR", "QDR"]))
def test_rate_round_trip(gbps: Decimal, lanes, kind):
    text = f"{gbps:f}"
    assert ib.parse_rate(f"{text} Gb/sec ({lanes}X {kind})\n".encode()) == float(text) * 125_000_000


# A small device: one port with a file of every kind, counters of every width class.
# relative path -> (family, labels, scale, kind, saturation max or 0)
DEV, PORT = "mlx5_0", ("mlx5_0", "1")
IB_FILES: dict[str, tuple[str, tuple[str, ...], int, str, int]] = {
    "ports/1/state": (fam.PORT_STATE.name, PORT, 1, "state", 0),
    "ports/1/phys_state": (fam.PORT_PHYS_STATE.name, PORT, 1, "state", 0),
    "ports/1/rate": (fam.PORT_RATE.name, PORT, 1, "rate", 0),
    "ports/1/counters/port_rcv_data": (fam.RX_BYTES.name, PORT, 4, "counter", 0),
    "ports/1/counters/symbol_error": (fam.SYMBOL_ERRORS.name, PORT, 1, "counter", 2**16 - 1),
    "ports/1/counters/link_downed": (fam.LINK_DOWNED.name, PORT, 1, "counter", 2**8 - 1),
    "ports/1/counters/vendor_thing": (fam.PORT_COUNTER.name, PORT + ("vendor_thing",), 1, "counter", 0),
    "ports/1/hw_counters/np_cnp_sent": (fam.CNP_SENT.name, PORT, 1, "counter", 0),
    "ports/1/hw_counters/local_ack_timeout_err": (fam.RETRANSMISSIONS.name, PORT + ("local_ack_timeout_err",),
                                                  1, "counter", 0),
    "hw_counters/req_cqe_error": (fam.HW_COUNTER.name, (DEV, "", "req_cqe_error"), 1, "counter", 0),
}


@pytest.fixture(scope="module")
def ib_tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sysfs")
    device = root / "class" / "infiniband" / DEV
    for rel in list(IB_FILES) + ["ports/1/link_layer", "hw_counters/lifespan"]:
        (device / rel).parent.mkdir(parents=True, exist_ok=True)
        (device / rel).write_text("InfiniBand\n" if rel.endswith("link_layer") else "0\n")
    return root


def _valid_text(kind: str) -> st.SearchStrategy[bytes]:
    if kind == "state":
        return st.tuples(st.integers(0, 7), st.sampled_from(["ACTIVE", "DOWN", "LinkUp", "Polling"])).map(
            lambda t: f"{t[0]}: {t[1]}\n".encode())
    if kind == "rate":
        return st.sampled_from([b"100 Gb/sec (4X EDR)\n", b"2.5 Gb/sec (1X SDR)\n", b"400 Gb/sec (4X NDR)\n"])
    return _digits.map(lambda n: f"{n}\n".encode())


_ib_contents = st.fixed_dictionaries({
    rel: st.one_of(_valid_text(spec[3]), st.binary(max_size=ib.READ_SIZE),
                   st.sampled_from([b"N/A (no PMA)\n", b"", b"0x1f\n", b" 12 \n", b"12\n34\n", b"-1\n",
                                    b"\xff\xfe", b"1_000\n", b"99999999999999999999999999\n"]))
    for rel, spec in IB_FILES.items()})


@FUZZ
@given(contents=_ib_contents)
def test_sysfs_reader_takes_any_file_content(ib_tree, contents):
    """Every file gives a number or one partial error naming it; valid u64 counters are exact."""
    device_dir = ib_tree / "class" / "infiniband" / DEV
    reader: ib.InfinibandReader | None = None

    def pread(fd: int, size: int, offset: int) -> bytes:
        assert offset == 0
        rel = str(Path(reader.fd_paths[fd]).relative_to(device_dir))
        return contents[rel][:size]

    reader = ib.InfinibandReader(ib_tree, pread=pread)
    try:
        (result,) = reader.collect()
    finally:
        reader.close()
    assert result.target == DEV
    if result.snapshot is None:  # every file failed: the device is down, with the first reasons
        assert result.reason == "unreadable" and result.message.startswith(f"no file of {DEV} could be read")
        assert not any(re.fullmatch(rb"[0-9]+\n", contents[rel]) for rel, spec in IB_FILES.items()
                       if spec[3] == "counter")
        return
    errors = "\n".join(result.partial_errors)
    parsed = result.snapshot.series
    saturated = 0
    for rel, (family, labels, scale, kind, saturate_at) in IB_FILES.items():
        got = parsed.get(family, {}).get(labels)
        if got is None:
            assert rel in errors, (rel, contents[rel])
            continue
        assert isinstance(got, (int, float)) and not isinstance(got, bool)
        assert f"{rel}:" not in errors
        raw = contents[rel]
        if kind == "counter" and re.fullmatch(rb"[0-9]+\n", raw):
            assert got == int(raw) * scale  # exact: no float rounding of 64-bit counters
        saturated += bool(saturate_at) and got >= saturate_at
    if saturated:
        assert parsed[fam.SATURATED.name][PORT] == saturated


# == (b) ethtool ioctl buffers =================================================================

REAL_STATS = ["rx_prio3_pause", "tx_prio3_pause_duration", "rx_prio9_pause", "rx_err_lane_2_phy",
              "rx_crc_errors_phy", "tx_pause_storm_error_events", "rx_prio0_marked", "rx_bytes_phy "]


class ScriptedKernel:
    """A SIOCETHTOOL handler that answers from a script: the stat set's size at each call (it may
    change between any two calls), arbitrary string-table bytes and values; `patched` as in
    test_ethtool.FakeKernel. It never writes past what the caller asked for plus the slack the
    caller allocates (older kernels write the current count regardless; our buffers carry room)."""

    def __init__(self, sizes: list[int], table: bytes, values: list[int], supported: bool,
                 patched: bool) -> None:
        self.sizes, self.table, self.values = sizes, table, values
        self.supported, self.patched = supported, patched
        self.calls = 0
        self.answered: set[int] = set()

    def __call__(self, fd: int, request: int, arg: bytes):
        _, address = struct.unpack_from("16sP", arg)
        cmd = struct.unpack("=I", ctypes.string_at(address, 4))[0]
        size = self.sizes[min(self.calls, len(self.sizes) - 1)]
        self.calls += 1
        if cmd == ETHTOOL_GSSET_INFO:
            self.answered.add(size)
            ctypes.memmove(address + 8, struct.pack("=QI", 0b10 if self.supported else 0, size), 12)
        elif cmd == ETHTOOL_GSTRINGS:
            expected = struct.unpack("=III", ctypes.string_at(address, 12))[2]
            if self.patched and expected != size:
                size = 0
            table = self.table[:size * ETH_GSTRING_LEN]
            ctypes.memmove(address + 8, struct.pack("=I", size), 4)
            ctypes.memmove(address + 12, table, len(table))
        elif cmd == ETHTOOL_GSTATS:
            expected = struct.unpack("=II", ctypes.string_at(address, 8))[1]
            if self.patched and expected != size:
                size = 0
            data = struct.pack(f"={size}Q", *self.values[:size])
            ctypes.memmove(address + 4, struct.pack("=I", size), 4)
            ctypes.memmove(address + 8, data, len(data))
        else:
            raise OSError(errno.EPERM, "unexpected command")
        return arg


MAX_STATS = 40
_entry = st.one_of(st.binary(min_size=ETH_GSTRING_LEN, max_size=ETH_GSTRING_LEN),
                   st.sampled_from(REAL_STATS).map(lambda n: n.encode().ljust(ETH_GSTRING_LEN, b"\0")))
_kernels = st.builds(
    ScriptedKernel,
    sizes=st.lists(st.integers(0, MAX_STATS), min_size=1, max_size=12),
    table=st.lists(_entry, min_size=MAX_STATS, max_size=MAX_STATS).map(b"".join),
    values=st.lists(st.integers(0, 2**64 - 1), min_size=MAX_STATS, max_size=MAX_STATS),
    supported=st.booleans(), patched=st.booleans())


def _decoded(entry: bytes) -> str:
    return entry.split(b"\0", 1)[0].decode("ascii", "replace").strip()


@FUZZ
@given(_kernels)
def test_ethtool_buffers_decode_or_fail_cleanly(kernel):
    ethtool = EthtoolIoctl(ioctl=kernel, retries=3)
    try:
        names, values = ethtool.read("eth0")
    except StatsNotSupported:
        assert not kernel.supported
        return
    except StatSetChanged:
        assert len(set(kernel.sizes)) > 1  # a stable set never gives up
        return
    finally:
        ethtool.close()
    assert kernel.supported
    n = len(names)
    assert len(values) == n and n in kernel.answered
    for i, name in enumerate(names):
        assert name == _decoded(kernel.table[i * ETH_GSTRING_LEN:(i + 1) * ETH_GSTRING_LEN])
        assert "\0" not in name and len(name) <= ETH_GSTRING_LEN
    assert list(values) == kernel.values[:n]


@pytest.fixture(scope="module")
def net_tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sysfs")
    (root / "class" / "net" / "eth0").mkdir(parents=True)
    return root


@SHORT
@given(_kernels)
def test_ethtool_collector_maps_any_stat_table(net_tree, kernel):
    provider = eth.IoctlStatsProvider(net_tree, EthtoolIoctl(ioctl=kernel, retries=3))
    collector = eth.EthtoolCollector(provider, interfaces=["eth0"], sysfs_root=net_tree,
                                     include_stats=["(?s).*"])
    try:
        (result,) = collector.collect()
    finally:
        collector.close()
    if result.snapshot is None:
        assert result.reason in ("not_supported", "stats_unstable")
        return
    series = result.snapshot.series
    count = series[fam.STAT_COUNT.name][("eth0",)]
    assert 0 < count <= MAX_STATS
    # Every stat goes to the raw family (include_stats matches all), the last of equal names winning.
    names = [_decoded(kernel.table[i * 32:(i + 1) * 32]) for i in range(int(count))]
    expected = {("eth0", name): kernel.values[i] for i, name in enumerate(names)}
    assert series[fam.DRIVER_STAT.name] == expected
    for family, values in series.items():
        assert all(isinstance(v, (int, float)) and v >= 0 for v in values.values()), family


# == (c) expositions and normalisation ==========================================================

_name_words = st.from_regex(r"[a-z]{1,8}", fullmatch=True)
_label_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: n not in ("le", "quantile") and not n.startswith("__"))
_label_values = st.text(max_size=12)
_floats = st.one_of(st.floats(allow_nan=True), st.integers(-10**6, 10**6).map(float))


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _fmt_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def _sample_line(name: str, labels: dict[str, str], value: float, timestamp: int | None) -> str:
    body = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items())
    line = f"{name}{{{body}}} {_fmt_value(value)}" if labels else f"{name} {_fmt_value(value)}"
    return line + (f" {timestamp}" if timestamp is not None else "")


@st.composite
def _expositions(draw) -> str:
    """A valid text-format exposition: counters, gauges, untyped, histograms and summaries.

    Counters follow the text-format (Go client) convention, `# TYPE x_total counter`: under a bare
    `# TYPE x counter` prometheus_client 0.26 leaves `x_total` samples out of the family (we group
    them, as OpenMetrics does), so that spelling is not a point of agreement.
    """
    lines: list[str] = []
    for index in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["counter", "gauge", "untyped", "histogram", "summary", "none"]))
        name = f"{draw(st.sampled_from(['', 'ns:']))}f{index}_{draw(_name_words)}"
        if kind == "counter":
            name += "_total"
        if kind != "none":
            if draw(st.booleans()):
                help_text = draw(st.text(max_size=20)).replace("\\", "\\\\").replace("\n", "\\n")
                lines.append(f"# HELP {name} {help_text}".rstrip()
                             if help_text.strip() else f"# HELP {name} x")
            lines.append(f"# TYPE {name} {kind}")
        label_names = draw(st.lists(_label_names, max_size=3, unique=True))
        label_sets = draw(st.lists(st.tuples(*[_label_values] * len(label_names)), min_size=1, max_size=3,
                                   unique=True))  # one series per label set, as in any exposition
        for values in label_sets:
            labels = dict(zip(label_names, values))
            ts = draw(st.one_of(st.none(), st.integers(0, 2 * 10**12)))
            if kind == "histogram":
                bounds = sorted(set(draw(st.lists(st.floats(-1e6, 1e6), max_size=4))))
                counts = sorted(draw(st.lists(st.integers(0, 1000), min_size=len(bounds) + 1,
                                              max_size=len(bounds) + 1)))
                for le, c in zip([*bounds, math.inf], counts):
                    lines.append(_sample_line(name + "_bucket", {**labels, "le": _fmt_value(le)}, float(c),
                                              ts))
                lines.append(_sample_line(name + "_sum", labels, draw(_floats), ts))
                lines.append(_sample_line(name + "_count", labels, float(counts[-1]), ts))
            elif kind == "summary":
                for q in draw(st.lists(st.sampled_from([0.5, 0.9, 0.99]), unique=True, max_size=3)):
                    lines.append(_sample_line(name, {**labels, "quantile": repr(q)}, draw(_floats), ts))
                lines.append(_sample_line(name + "_sum", labels, draw(_floats), ts))
                lines.append(_sample_line(name + "_count", labels, float(draw(st.integers(0, 99))), ts))
            else:
                lines.append(_sample_line(name, labels, draw(_floats), ts))
    return "\n".join(lines) + "\n"


def _same_number(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@FUZZ
@given(_expositions())
def test_parser_agrees_with_prometheus_client(text):
    untyped = {"untyped": "unknown"}  # prometheus_client calls a declared `untyped` family `unknown`
    mine = [(f.name, untyped.get(f.type, f.type), s.name, s.labels, s.value)
            for f in parse(text).values() for s in f.samples]
    theirs = [(f.name, f.type, s.name, s.labels, s.value) for f in text_string_to_metric_families(text)
              for s in f.samples]
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        assert a[:4] == b[:4]
        assert _same_number(a[4], b[4])


# Lines that are almost the format, so the fuzz spends its time near the parser's decisions.
_fragments = st.sampled_from([
    "# TYPE vllm:time_to_first_token_seconds histogram", "# TYPE x counter", "# TYPE x gauge",
    "# TYPE x bogus",
    "# HELP x a\\nb", "# UNIT x seconds", "# EOF", "#", "# TYPE", "# TYPE 1x gauge", "x_total 1", "x 2 3",
    'vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 3',
    'vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 4',
    "vllm:time_to_first_token_seconds_count 4", 'x{a="1",b="\\"}"} 1', 'x{a="1",} 1', 'x{a=1} 1', "x{} 1",
    'x{a="\\q"} NaN', "x +Inf", "x -Inf 17", "x 1e999", "x 0x1f", "x 1_0", "x nan", "{} 1", "x", " ", "\t",
    "x 1 # {trace_id=\"a\"} 1", "x{a=\"1\"} 1.5 1.5",
])
_exposition_like = st.lists(st.one_of(_fragments, st.text(max_size=30)), max_size=12).map("\n".join)


@FUZZ
@given(st.one_of(_exposition_like, st.text(max_size=200)), st.booleans())
def test_any_text_parses_or_is_a_parse_error(text, openmetrics):
    try:
        families = parse(text, openmetrics=openmetrics)
    except ParseError as exc:
        assert exc.reason in ("not_prometheus", "truncated")
        assert 0 <= exc.lineno <= text.count("\n") + 1
        return
    for name, family in families.items():
        assert family.name == name
        for s in family.samples:
            assert isinstance(s.value, float)
            assert all(isinstance(k, str) and isinstance(v, str) for k, v in s.labels.items())
    cached: dict = {}
    again = parse(text, openmetrics=openmetrics, label_cache=cached)
    assert [(s.name, s.labels) for f in again.values() for s in f.samples] == \
           [(s.name, s.labels) for f in families.values() for s in f.samples]


# Engine histograms with the labels that drive merging (ranks, models), bucket sets that differ
# between series, in each engine's unit.
ENGINE_HISTOGRAMS = {
    "vllm": ("vllm:time_to_first_token_seconds", {"model_name": ["a", "b"], "engine": ["0", "1"]}),
    "sglang": ("sglang:time_to_first_token_seconds",
               {"model_name": ["a"], "tp_rank": ["0", "1", "x", ""], "dp_rank": ["0", "1"]}),
    "triton": ("nv_inference_first_response_histogram_ms", {"model": ["a", "b"], "version": ["1"]}),
    "trtllm": ("trtllm_time_to_first_token_seconds",
               {"model_name": ["a"], "is_streaming": ["true", "false"]}),
    "tgi": ("tgi_request_duration", {"priority": ["0", "1"]}),
}


@st.composite
def _engine_exposition(draw) -> tuple[str, str]:
    fmt = draw(st.sampled_from(sorted(ENGINE_HISTOGRAMS)))
    name, label_choices = ENGINE_HISTOGRAMS[fmt]
    lines = [f"# TYPE {name} histogram"]
    all_bounds = [0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 10.0, 1000.0]
    seen: set[tuple] = set()
    for _ in range(draw(st.integers(1, 5))):
        labels = {k: draw(st.sampled_from(v)) for k, v in label_choices.items() if draw(st.booleans())}
        if tuple(labels.items()) in seen:
            continue  # a valid exposition has each series once
        seen.add(tuple(labels.items()))
        bounds = sorted(draw(st.sets(st.sampled_from(all_bounds), max_size=6)))
        counts = sorted(draw(st.lists(st.integers(0, 10**6), min_size=len(bounds) + 1,
                                      max_size=len(bounds) + 1)))
        for le, c in zip([*bounds, math.inf], counts):
            lines.append(_sample_line(name + "_bucket", {**labels, "le": _fmt_value(le)}, float(c), None))
        lines.append(_sample_line(name + "_sum", labels, float(draw(st.integers(0, 10**6))), None))
        lines.append(_sample_line(name + "_count", labels, float(counts[-1]), None))
    return fmt, "\n".join(lines) + "\n"


def _normalise(text: str, keep=()):
    families = parse(text)
    fmt = norm.detect(families)
    if fmt is None:
        return None
    families = norm.canonical_names(families, fmt)
    return norm.normalise(families, fmt, "ep", norm.engine_label(fmt, families), keep, "model")


@FUZZ
@given(_engine_exposition(), st.lists(st.sampled_from(norm.KEEPABLE), max_size=3))
def test_normalised_histograms_are_valid(exposition, keep):
    fmt, text = exposition
    snap = _normalise(text, keep)
    assert snap is not None
    histograms = [h for series in snap.series.values() for h in series.values() if isinstance(h, Histogram)]
    for h in histograms:
        bounds = [le for le, _ in h.buckets]
        counts = [c for _, c in h.buckets]
        assert bounds[-1] == math.inf
        assert all(a < b for a, b in zip(bounds, bounds[1:])), bounds
        assert not any(math.isnan(x) for x in bounds + counts + [h.sum, h.count])
        assert all(a <= b for a, b in zip(counts, counts[1:])), counts
        assert h.count == counts[-1]


_engine_names = sorted({name for rules in norm.MAPPINGS.values() for rule in rules for name in
                        re.findall(r"(?:vllm|sglang|nv_|trtllm_|tgi_)[\w:]*", repr(rule))}) or ["vllm:x"]


@st.composite
def _engine_noise(draw) -> str:
    """Engine-named samples with any type, labels and values (NaN, infinities, negatives)."""
    lines = []
    for _ in range(draw(st.integers(1, 12))):
        name = draw(st.sampled_from(_engine_names))
        if draw(st.booleans()):
            lines.append(f"# TYPE {name} "
                         f"{draw(st.sampled_from(['counter', 'gauge', 'histogram', 'summary']))}")
        suffix = draw(st.sampled_from(["", "_total", "_bucket", "_sum", "_count"]))
        keys = draw(st.lists(st.sampled_from(["le", "model_name", "model", "engine", "tp_rank", "dp_rank",
                                              "finished_reason", "request_type", "kv_cache_block_type",
                                              "cache_source", "version"]), unique=True, max_size=4))
        labels = {k: draw(st.sampled_from(["0", "1", "NaN", "+Inf", "x", "", "scheduled", "used", "max",
                                           "total", "stop", "abort"])) for k in keys}
        lines.append(_sample_line(name + suffix, labels, draw(_floats), None))
    return "\n".join(lines) + "\n"


@FUZZ
@given(_engine_noise(), st.lists(st.sampled_from(norm.KEEPABLE), max_size=3))
def test_normalise_never_crashes_on_engine_like_input(text, keep):
    try:
        families = parse(text)
    except ParseError:
        return
    for fmt in norm.FORMATS:
        snap = norm.normalise(norm.canonical_names(families, fmt), fmt, "ep", fmt, keep)
        for series in snap.series.values():
            for value in series.values():
                assert isinstance(value, (float, int, Histogram))


_dcgm_fields = sorted(FIELD_MAP) + ["DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_FB_FREE",
                                    "DCGM_FI_DEV_UNKNOWN_THING", "DCGM_FI_PROF_NEW"]
_dcgm_values = st.one_of(_floats, st.sampled_from([INT64_BLANK, FP64_BLANK, 2.0**64, -2.0**63, -1.0]))


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(_dcgm_fields), st.sampled_from(["0", "1", None]),
                          st.dictionaries(st.sampled_from(["UUID", "GPU_I_ID", "pod", "Hostname",
                                                           "modelName"]),
                                          _label_values, max_size=3), _dcgm_values), max_size=15))
def test_dcgm_mapping_takes_any_values(samples):
    lines = []
    for field, gpu, labels, value in samples:
        if gpu is not None:
            labels = {**labels, "gpu": gpu}
        lines.append(_sample_line(field, labels, value, None))
    mapper = DcgmMapper(hostname="this")
    snap = mapper.map(parse("\n".join(lines) + "\n"))
    for family, series in snap.series.items():
        for value in series.values():
            assert isinstance(value, float) and not math.isnan(value), family
    # Sentinels are dropped, never exported as huge numbers.
    blank_inputs = sum(1 for field, gpu, _, value in samples if gpu is not None and field in FIELD_MAP
                       and (math.isnan(value)
                            or value >= (FP64_BLANK if FIELD_MAP[field].floating else INT64_BLANK)))
    assert mapper.blanks >= blank_inputs


# == (d) gNMI paths and values ==================================================================

_elem_names = st.text(string.ascii_letters + string.digits + "-_.:", min_size=1, max_size=12)
_key_names = st.text(string.ascii_letters + string.digits + "-_.:", min_size=1, max_size=8)
_elems = st.lists(st.tuples(_elem_names, st.dictionaries(_key_names, st.text(max_size=10), max_size=3).map(
    lambda keys: tuple(sorted(keys.items())))), min_size=1, max_size=6).map(tuple)


@FUZZ
@given(_elems)
def test_path_round_trip(elems):
    """string -> Path proto -> string gives back the same path, whatever the key values hold."""
    text = format_path(elems)
    proto = to_proto(text)
    assert from_proto(proto, strip=False) == elems
    assert format_path(from_proto(proto, strip=False)) == text
    assert from_proto(pb.Path.FromString(proto.SerializeToString()), strip=False) == elems


_path_like = st.lists(st.one_of(st.sampled_from(["/", "[", "]", "=", "\\", "*", "{a}", "{b:\\d+}", "{", "}",
                                                 "interface", "name", "{0..3}", ":", "(", "?P<x>"]),
                                st.text(max_size=4)), max_size=14).map("".join)


@FUZZ
@given(st.one_of(_path_like, st.text(max_size=40)))
def test_any_path_text_parses_or_is_a_syntax_error(text):
    try:
        elems = parse_path(text)
    except PathSyntaxError:
        elems = None
    if elems is not None:
        assert all(name for name, _ in elems)
        to_proto(text)
    try:
        pattern = PathPattern(text)
    except PathSyntaxError:
        return
    concrete = tuple((n, tuple(sorted(k.items()))) for n, k in elems or ())
    if len(concrete) == len(pattern):
        captured = pattern.match(concrete)
        assert captured is None or all(isinstance(v, str) for v in captured.values())


@FUZZ
@given(st.lists(st.tuples(st.text(max_size=12), st.dictionaries(st.text(max_size=6), st.text(max_size=6),
                                                                max_size=3)), max_size=5),
       st.text(max_size=8), st.text(max_size=8))
def test_any_path_proto_decodes(elems, origin, target):
    path = pb.Path(origin=origin, target=target, elem=[pb.PathElem(name=n, key=k) for n, k in elems])
    for strip in (True, False):
        decoded = from_proto(path, strip)
        assert len(decoded) == len(elems)
        for (name, keys), (raw_name, raw_keys) in zip(decoded, elems):
            assert dict(keys) == raw_keys
            assert name == (strip_module(raw_name) if strip else raw_name)
        format_path(decoded)


# The strategies below are built once per key vocabulary (functools.cache: a strategy is immutable),
# not at every draw: the fuzz's time goes to examples, not to rebuilding what draws them.
@functools.cache
def _json_docs(keys: tuple[str, ...]):
    leaves = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(),
                       st.text(max_size=8), st.sampled_from(["12", "1e999", "NaN", "UP", "DOWN", "-0"]))
    return st.recursive(leaves, lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.sampled_from(keys) | st.text(max_size=5), children,
                                                        max_size=4)), max_leaves=20)


@functools.cache
def _json_bytes(keys: tuple[str, ...]):
    nested = st.integers(1, 5000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n)
    return st.one_of(_json_docs(keys).map(lambda d: json.dumps(d).encode()), st.binary(max_size=40), nested,
                     st.sampled_from([b"[" * 100_000, b"1" + b"0" * 400, b'"\xff"', b"", b"1e999", b'"12"']))


@st.composite
def _typed_values(draw, keys: tuple[str, ...]) -> pb.TypedValue:
    which = draw(st.sampled_from(["string_val", "int_val", "uint_val", "bool_val", "bytes_val", "float_val",
                                  "double_val", "decimal_val", "leaflist_val", "any_val", "json_val",
                                  "json_ietf_val", "ascii_val", "proto_bytes", "empty"]))
    if which == "empty":
        return pb.TypedValue()
    if which in ("string_val", "ascii_val"):
        return pb.TypedValue(**{which: draw(st.one_of(st.text(max_size=10),
                                                      st.sampled_from(["12", "UP", "1e999"])))})
    if which == "int_val":
        return pb.TypedValue(int_val=draw(st.integers(-2**63, 2**63 - 1)))
    if which == "uint_val":
        return pb.TypedValue(uint_val=draw(st.integers(0, 2**64 - 1)))
    if which == "bool_val":
        return pb.TypedValue(bool_val=draw(st.booleans()))
    if which in ("bytes_val", "proto_bytes"):
        return pb.TypedValue(**{which: draw(st.binary(max_size=16))})
    if which == "float_val":
        return pb.TypedValue(float_val=draw(st.floats(width=32)))
    if which == "double_val":
        return pb.TypedValue(double_val=draw(st.floats()))
    if which == "decimal_val":
        return pb.TypedValue(decimal_val=pb.Decimal64(digits=draw(st.integers(-2**63, 2**63 - 1)),
                                                      precision=draw(st.integers(0, 2**32 - 1))))
    if which == "leaflist_val":
        elements = draw(st.lists(_typed_values(keys), max_size=3))
        return pb.TypedValue(leaflist_val=pb.ScalarArray(element=elements))
    if which == "any_val":
        return pb.TypedValue(any_val=any_pb2.Any(type_url=draw(st.text(max_size=8)),
                                                 value=draw(st.binary(max_size=8))))
    return pb.TypedValue(**{which: draw(_json_bytes(keys))})


@FUZZ
@given(_typed_values(("a",)))
def test_typed_value_decodes_or_is_malformed(tv):
    which = tv.WhichOneof("value")
    try:
        value = load_json(getattr(tv, which)) if which in ("json_val", "json_ietf_val") else scalar(tv, which)
    except MalformedValue:
        return
    try:
        number = to_number(value)
    except MalformedValue:
        return
    assert isinstance(number, float)
    if which == "decimal_val":  # exact: digits / 10**precision, correctly rounded
        with localcontext(Context(Emin=MIN_EMIN, Emax=MAX_EMAX)):
            assert number == float(Decimal(tv.decimal_val.digits).scaleb(-tv.decimal_val.precision))


@FUZZ
@given(_json_docs(("a", "queue", "name")))
def test_flatten_json_yields_scalar_leaves(doc):
    base = (("root", ()),)
    for path, value in flatten_json(base, doc, {"queue": ("name",)}, strip=True):
        assert path[:1] == base and not isinstance(value, (dict, list))


PROFILES = load_profiles()


def _parse_vocabulary(profile) -> tuple[tuple[str, ...], tuple[str, ...]]:
    names, keys = set(), set()
    for rule in profile.rules:
        for name, elem_keys in parse_path(rule.pattern.text):
            names.add(name)
            keys.update(elem_keys)
    return tuple(sorted(names)), tuple(sorted(keys))


_VOCABULARY = {name: _parse_vocabulary(profile) for name, profile in PROFILES.items()}


def _vocabulary(profile) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Element and key names of a profile's rule patterns: what a fuzzed path is built from."""
    return _VOCABULARY[profile.name]


_fill = st.sampled_from(["0", "3", "Ethernet0", "Ethernet4:3", "swp1", "eth1/1", "", "*", "UP", "a]b\\"])


@st.composite
def _concrete_rule_path(draw, profile) -> str:
    """A rule pattern with its captures and globs replaced by concrete (sometimes odd) values."""
    text = draw(st.sampled_from([rule.pattern.text for rule in profile.rules]))

    def fill(match: re.Match) -> str:
        value = draw(_fill)
        if text.count("[", 0, match.start()) > text.count("]", 0, match.start()):  # a key value: escape
            return value.replace("\\", "\\\\").replace("]", "\\]")
        return re.sub(r"[/\[\]\\]", "_", value) or "x"  # an element name: no path syntax in it

    text = re.sub(r"\{[^{}]*\}", fill, text)
    return text.replace("*", draw(st.sampled_from(["x", "Ethernet8", ""])))


@functools.cache
def _random_paths(profile_name: str):
    """Paths of up to five elements from the profile's names (or any), with its keys."""
    names, keys = _VOCABULARY[profile_name]
    element = st.tuples(st.sampled_from(names) | st.text(max_size=6).filter(bool),
                        st.dictionaries(st.sampled_from(keys or ("name",)), _fill, max_size=2))
    return st.lists(element, max_size=5).map(
        lambda elems: pb.Path(elem=[pb.PathElem(name=n, key=k) for n, k in elems]))


@st.composite
def _notifications(draw, profile) -> pb.Notification:
    names, _ = _vocabulary(profile)
    random_path = _random_paths(profile.name)

    def split_rule_path() -> tuple[pb.Path, pb.Path]:
        try:
            elems = list(to_proto(draw(_concrete_rule_path(profile))).elem)
        except PathSyntaxError:
            elems = []
        cut = draw(st.integers(0, len(elems)))
        return pb.Path(elem=elems[:cut]), pb.Path(elem=elems[cut:])

    prefix, _ = split_rule_path() if draw(st.booleans()) else (draw(random_path), None)
    updates = []
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            _, path = split_rule_path()
        else:
            path = draw(random_path)
        updates.append(pb.Update(path=path, val=draw(_typed_values(names))))
    deletes = draw(st.lists(random_path, max_size=2))
    return pb.Notification(prefix=prefix, update=updates, delete=deletes,
                           timestamp=draw(st.integers(0, 2**62)))


_STATUS = {f.name for f in STATUS_FAMILIES}


@pytest.mark.parametrize("profile_name", sorted(PROFILES))
@settings(FUZZ, max_examples=60)
@given(data=st.data())
def test_switch_state_takes_any_notification(profile_name, data):
    """Whatever a switch sends: decoded series or counted malformed updates, never an exception."""
    profile = PROFILES[profile_name]
    state = SwitchState("sw", profile)
    state.begin_session()
    for _ in range(data.draw(st.integers(1, 4))):
        n = data.draw(_notifications(profile))
        before_updates, before_bad = state.updates, state.malformed
        state.apply(n)
        assert state.updates == before_updates + len(n.update)
        assert state.malformed >= before_bad
        if not any(u.val.WhichOneof("value") in ("json_val", "json_ietf_val") for u in n.update):
            assert state.malformed - before_bad <= len(n.update)  # at most one per scalar update
    for name, series in state.snapshot.series.items():
        if name in _STATUS:
            continue
        for value in series.values():
            assert isinstance(value, (int, float)) and not isinstance(value, bool), (name, value)
    state.on_sync()
    state.sweep()
    state.clear_data()
    assert state.series_count() == len(_STATUS)


def _data_and_counts(state: SwitchState) -> tuple[dict, float, float]:
    data = {(name, labels): (value, type(value)) for name, series in state.snapshot.series.items()
            if name not in _STATUS for labels, value in series.items()}
    return data, state.updates, state.malformed


@pytest.mark.parametrize("profile_name", sorted(PROFILES))
@settings(FUZZ, max_examples=60)
@given(data=st.data())
def test_bulk_and_per_update_paths_agree_on_any_notification(profile_name, data):
    """Differential: the bulk decode (gnmi_wire views + plans) and the per-update path give the
    same series and counts, whatever the switch sends, repeated so that cached plans get used."""
    profile = PROFILES[profile_name]
    bulk, each = SwitchState("sw", profile), SwitchState("sw", profile)
    each._apply_bulk = lambda *args: None  # noqa: SLF001 - the reference implementation
    notes = data.draw(st.lists(_notifications(profile), min_size=1, max_size=3))
    for n in notes + notes:
        bulk.apply(n)
        each.apply(n)
        assert _data_and_counts(bulk) == _data_and_counts(each)
    assert bulk.bound == each.bound


@settings(FUZZ, max_examples=200)
@given(raw=st.binary(max_size=200))
def test_any_bytes_on_the_stream_are_taken_or_counted(raw):
    """What `SwitchSession._read` does with a message: the bulk view, or the raw fallback."""
    state = SwitchState("sw", PROFILES["openconfig"])
    try:
        response = gnmi_wire.SubscribeResponse.FromString(raw)
    except DecodeError:
        state.apply_wire(None, raw)
        assert state.malformed >= 1 or state.updates >= 1
        return
    if response.WhichOneof("response") == "update":
        state.apply_wire(response.update, raw)


_bad_json = st.one_of(st.binary(max_size=30),
                      st.sampled_from([b"[" * 100_000, b'{"a":' * 3000, b"", b"\xff"]))


@pytest.mark.parametrize("profile_name", sorted(PROFILES))
@settings(FUZZ, max_examples=30)
@given(data=st.data())
def test_undecodable_json_is_counted_malformed(profile_name, data):
    profile = PROFILES[profile_name]
    raw = data.draw(_bad_json)
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        pass
    else:
        assume(False)
    state = SwitchState("sw", profile)
    path = to_proto(data.draw(_concrete_rule_path(profile)))
    which = data.draw(st.sampled_from(["json_val", "json_ietf_val"]))
    state.apply(pb.Notification(update=[pb.Update(path=path, val=pb.TypedValue(**{which: raw}))]))
    assert state.snapshot.series[MALFORMED.name][("sw",)] == 1.0
    assert state.snapshot.series[UPDATES.name][("sw",)] == 1.0


# == scrape.py helpers that read what operators and peers provide =================================


@FUZZ
@given(st.one_of(st.text(max_size=40), st.from_regex(r"https?://[a-z.]{1,8}(:[0-9a-z]{0,7})?/[a-z?=&@]{0,10}",
                                                     fullmatch=True)))
def test_redact_url_never_raises(url):
    redacted = redact_url(url)
    assert "?" not in redacted or redacted == "<invalid url>"


@FUZZ
@given(st.one_of(st.text(max_size=60), st.sampled_from(['{"a":' + "[" * 5000, '{"a": 1}', "A: b\nC", "{"]),
                 st.dictionaries(st.text(max_size=5), st.text(max_size=5)).map(json.dumps)))
def test_headers_text_parses_or_is_value_error(text):
    try:
        headers = parse_headers_text(text)
    except ValueError:
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())


def test_known_bad_inputs_from_fuzzing():
    """The inputs fuzzing found, kept as plain regression checks."""
    # A -Inf clock-reason bitmask used to escape as OverflowError from int().
    mapper = DcgmMapper()
    mapper.map(parse('DCGM_FI_DEV_CLOCKS_EVENT_REASONS{gpu="0"} -Inf\n'))
    assert mapper.blanks == 1
    # JSON nested past the interpreter's recursion limit, and integers beyond a float.
    for raw in (b"[" * 100_000, b"1" + b"0" * 400):
        with pytest.raises(MalformedValue):
            to_number(load_json(raw))
    # A huge Decimal64 precision must not compute 10**4294967295.
    assert scalar(pb.TypedValue(decimal_val=pb.Decimal64(digits=5, precision=2**32 - 1)),
                  "decimal_val") == 0.0
    # '[' inside a key value (format_path does not escape it) parses back.
    assert parse_path("/a[k=x[y]/b") == [("a", {"k": "x[y"}), ("b", {})]
    # A port the URL parser rejects leaves a redacted URL, not a ValueError.
    assert redact_url("http://user:pw@host:99999/metrics?token=x") == "<invalid url>"
    with pytest.raises(ValueError):
        parse_headers_text('{"a":' + "[" * 100_000)
    # YAML nested deeper than PyYAML's recursive composer can go is a ConfigError, like any bad YAML.
    for text in ("[" * 5000, "a: " + "{b: " * 5000):
        with pytest.raises(ConfigError) as err:
            load_text(text, "deep.yaml")
        assert str(err.value).startswith("deep.yaml")
