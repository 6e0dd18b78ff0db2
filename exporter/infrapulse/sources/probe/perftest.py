"""Parse perftest output (ib_write_lat, ib_write_bw, ib_read_lat, ...): text and `--out_json`.

Text (linux-rdma/perftest src/perftest_parameters.{c,h}; docs/probes.md cites the commit): a
title line such as `RDMA_Write BW Test` opens a report; `Device : mlx5_0` and `Link type : IB`
follow; the table header names the columns, read by name here because they differ by test and
version: `#bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]` (MiB/sec since
2024-03, the same 2^20 unit; Gb/sec = 10^9 bits with --report_gbits; per-port, QoS `#sl` and
`CPU_Util[%]` variants), `#bytes #iterations t_min[usec] t_max[usec] t_typical[usec]` (before
2016) then `t_avg t_stdev 99% percentile 99.9% percentile`, or `t_avg[usec] tps average`
(duration mode). `Conflicting CPU frequency values detected` (stderr) may sit between the header
and the rows. Server and client output may be concatenated: a report after `Waiting for client
to connect` is the server's.

JSON: one message size per file, rewritten per report. Before perftest f9e82f7 (2024-01) the
file was not JSON: keys and most values unquoted, trailing commas, `percentile_99.9` and
`Test with events` as keys; the QoS report still writes `sl:` unquoted. A line-based reader takes
both. The JSON does not say its bandwidth unit: the caller knows whether it passed
--report_gbits.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .results import GBIT, MIB, PerftestResult, PerftestRow, ProbeParseError

_TITLE = re.compile(r"^(Send|Send_imm|RDMA_Write|RDMA_Write_imm|RDMA_Read|Atomic)\b(.*)\bTest\b")
_VERB = {"Send": "send", "Send_imm": "send", "RDMA_Write": "write", "RDMA_Write_imm": "write",
         "RDMA_Read": "read", "Atomic": "atomic"}
_DEVICE = re.compile(r"\bDevice\s*:\s*(\S+)")
_LINK = re.compile(r"^Link type\s*:\s*(\S+)")
_WAITING = re.compile(r"Waiting for client")
# A launcher's prefix on every line: `srun --label` ("0: "), `mpirun --tag-output` ("[1,0]<stdout>:").
_LAUNCHER = re.compile(r"^(?:\d+: |\[\d+,\d+\]<std(?:out|err)>:)")
# Table columns in the order they may appear; 99.9% before 99% so the longer label wins.
_COLUMN = re.compile(
    r"(?P<bytes>#bytes)|(?P<sl>#sl)|(?P<iterations>#iterations)"
    r"|BW (?P<bw_port>Port\d)\[(?P<port_unit>[^\]]+)\]|MsgRate (?P<rate_port>Port\d)\[Mpps\]"
    r"|BW peak\[(?P<peak_unit>[^\]]+)\]|BW average\[(?P<avg_unit>[^\]]+)\]|(?P<msg_rate>MsgRate\[Mpps\])"
    r"|(?P<t_min>t_min\[\w+\])|(?P<t_max>t_max\[\w+\])|(?P<t_typical>t_typical\[\w+\])"
    r"|(?P<t_avg>t_avg\[\w+\])|(?P<t_stdev>t_stdev\[\w+\])"
    r"|(?P<p99_9>99\.9% percentile\[\w+\])|(?P<p99>99% percentile\[\w+\])"
    r"|(?P<tps>tps average)|(?P<cpu_util>CPU_Util\[%\])")
_LATENCY_COLUMNS = ("t_min", "t_max", "t_typical", "t_avg", "t_stdev", "p99", "p99_9")
_BW_FACTOR = {"MB/sec": MIB, "MiB/sec": MIB, "Gb/sec": GBIT}


# perftest_parameters.c, duration mode and --run_infinitely: "BW peak won't be measured in this run."
_PEAK_NOT_MEASURED = re.compile(r"peak\s+won'?t\s+be\s+measured", re.IGNORECASE)


def test_name(verb: str, title_rest: str) -> tuple[str, str]:
    """("RDMA_Write", " BW ") -> ("ib_write_bw", "bw")."""
    kind = "bw" if re.search(r"\bBW\b", title_rest) else "lat"
    return f"ib_{_VERB.get(verb, verb.lower())}_{kind}", kind


def _columns(header: str) -> tuple[list[str], str] | None:
    """Column keys of a `#bytes ...` header line and its bandwidth unit."""
    names: list[str] = []
    unit = ""
    for m in _COLUMN.finditer(header):
        kind = m.lastgroup or ""
        if kind in ("peak_unit", "avg_unit", "port_unit"):
            unit = unit or m.group(kind)
            names.append({"peak_unit": "bw_peak", "avg_unit": "bw_average"}.get(kind, "bw_port"))
        elif kind in ("bw_port", "rate_port"):
            names.append(kind)
        else:
            names.append(kind)
    if not names or names[0] != "bytes":
        return None
    return names, unit


def _row(names: list[str], tokens: list[str], unit: str) -> PerftestRow | None:
    if len(tokens) != len(names):
        return None
    try:
        values = [float(t) for t in tokens]
    except ValueError:
        return None
    named = dict(zip(names, values))
    factor = _BW_FACTOR.get(unit, MIB)
    latency = {k: named[k] for k in _LATENCY_COLUMNS if k in named}
    bandwidth = {k[3:]: named[k] * factor for k in ("bw_peak", "bw_average") if k in named}
    rate = named["msg_rate"] * 1e6 if "msg_rate" in named else None
    return PerftestRow(int(named["bytes"]), int(named.get("iterations", 0)), latency, bandwidth, rate)


def parse_text(text: str) -> list[PerftestResult]:
    """Every report in perftest's stdout (client, and server when both were captured). Raises
    ProbeParseError when there is no report table at all."""
    results: list[PerftestResult] = []
    current: PerftestResult | None = None
    columns: tuple[list[str], str] | None = None
    server_next = False
    no_peak = False
    for raw in text.splitlines():
        line = raw.strip()
        if line and (tag := _LAUNCHER.match(line)):
            line = line[tag.end():].strip()
        if not line or line.startswith("---") or line.startswith("***"):
            continue
        if _WAITING.search(line):
            server_next = True
            continue
        if _PEAK_NOT_MEASURED.search(line):
            no_peak = True  # --run_infinitely / -D: the peak column then prints 0.00
            continue
        if m := _TITLE.match(line):
            name, kind = test_name(m.group(1), m.group(2))
            current = PerftestResult(test=name, kind=kind, role="server" if server_next else "client")
            server_next = False
            results.append(current)
            columns = None
            continue
        if current is None:
            continue
        if m := _DEVICE.search(line):
            current.device = m.group(1)
        if m := _LINK.match(line):
            current.link_type = m.group(1)
        if line.startswith("#bytes"):
            columns = _columns(line)
            if columns is not None:
                current.bw_unit = columns[1]
            continue
        if columns is None or not line[0].isdigit():
            continue  # "Conflicting CPU frequency values detected", address lines, warnings
        row = _row(columns[0], line.split(), columns[1])
        if row is None:
            current.skipped_lines += 1
        else:
            if no_peak:
                row.bandwidth.pop("peak", None)  # not measured: absent, never a 0 B/s peak
                current.peak_measured = False
            current.rows.append(row)
    reports = [r for r in results if r.rows]
    if not reports:
        raise ProbeParseError("no perftest report table in the output", "no_table")
    return reports


# -- JSON ------------------------------------------------------------------------------------

_JSON_LINE = re.compile(r'^"?(?P<key>[^":]*?)"?\s*:\s*(?P<value>.*?)\s*,?\s*$')
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$")


def _legacy_json(text: str) -> dict[str, Any]:
    """The pre-2024 `--out_json` file: one key per line, `key: value,` with keys and most values
    unquoted, `}` or `},` closing objects."""
    root: dict[str, Any] = {}
    stack: list[dict[str, Any]] = [root]
    opened = False
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line == "{" and not opened:
            opened = True
            continue
        if line.rstrip(",") == "}":
            if len(stack) > 1:
                stack.pop()
            continue
        m = _JSON_LINE.match(line)
        if m is None:
            raise ProbeParseError(f"perftest JSON line {lineno}: not `key: value`: {line[:80]!r}",
                                  "invalid_json")
        key, value = m.group("key").strip(), m.group("value")
        if value == "{":
            child: dict[str, Any] = {}
            stack[-1][key] = child
            stack.append(child)
        elif len(value) >= 2 and value[0] == value[-1] == '"':
            stack[-1][key] = value[1:-1]
        elif _NUMBER.match(value):
            stack[-1][key] = float(value) if any(c in value for c in ".eE") else int(value)
        else:
            stack[-1][key] = value
    return root


def _json_value(results: dict[str, Any], key: str) -> float | None:
    value = results.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)
    except ValueError:
        raise ProbeParseError(f"perftest JSON: results.{key} is not a number: {value!r}") from None


def parse_json(text: str, gbits: bool = False) -> PerftestResult:
    """One `--out_json` file (standard or pre-2024). `gbits`: the run passed --report_gbits, so
    BW_peak/BW_average are Gb/s, else MiB/s."""
    fmt = "json"
    try:
        doc = json.loads(text)
    except ValueError:
        doc = _legacy_json(text)
        fmt = "json-legacy"
    except RecursionError:
        raise ProbeParseError("perftest JSON nested too deeply", "invalid_json") from None
    if not isinstance(doc, dict):
        raise ProbeParseError("perftest JSON is not an object", "invalid_json")
    info = doc.get("test_info") if isinstance(doc.get("test_info"), dict) else {}
    results = doc.get("results")
    if not isinstance(results, dict):
        raise ProbeParseError("perftest JSON has no `results` object", "no_table")
    assert isinstance(info, dict)
    title = str(info.get("test", ""))
    m = re.match(r"^(Send_imm|Send|RDMA_Write_imm|RDMA_Write|RDMA_Read|Atomic)_(.*)$", title)
    name, kind = test_name(m.group(1), m.group(2).replace("_", " ")) if m else ("", "")
    out = PerftestResult(test=name, kind=kind, device=str(info.get("Device", "")),
                         link_type=str(info.get("Link_type", "")), source_format=fmt,
                         bw_unit="Gb/sec" if gbits else "MiB/sec")
    size = _json_value(results, "MsgSize")
    iters = _json_value(results, "n_iterations")
    latency = {}
    for column, key in (("t_min", "t_min"), ("t_max", "t_max"), ("t_typical", "t_typical"),
                        ("t_avg", "t_avg"), ("t_stdev", "t_stdev"), ("p99", "percentile_99"),
                        ("p99_9", "percentile_99.9"), ("t_avg", "avg_lat")):
        value = _json_value(results, key)
        if value is not None:
            latency[column] = value
    factor = GBIT if gbits else MIB
    bandwidth = {}
    for column, key in (("peak", "BW_peak"), ("average", "BW_average"), ("average", "bw_avg")):
        value = _json_value(results, key)
        if value is not None:
            bandwidth[column] = value * factor
    rate = _json_value(results, "MsgRate")
    if not kind:
        kind = "bw" if bandwidth else "lat"
        out.kind = kind
    if not latency and not bandwidth:
        raise ProbeParseError("perftest JSON `results` has neither latencies nor bandwidths", "no_table")
    out.rows.append(PerftestRow(int(size or 0), int(iters or 0), latency, bandwidth,
                                rate * 1e6 if rate is not None else None))
    return out


def parse(text: str, gbits: bool = False) -> list[PerftestResult]:
    """Text or JSON, by the first character."""
    if text.lstrip()[:1] == "{":
        return [parse_json(text, gbits)]
    return parse_text(text)
