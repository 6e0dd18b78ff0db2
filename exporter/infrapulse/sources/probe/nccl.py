"""Parse nccl-tests output: the text table of every version, and the `-J` JSON file.

The text table is read by its header line, not by fixed positions, because the columns changed
over the years (NVIDIA/nccl-tests src/common.cu, src/util.cu; docs/probes.md cites commits):

* before 2022: no `root` column (broadcast/reduce printed `root` instead of `redop`), and an
  `error` column holding the largest deviation (`%5.0le`, e.g. `2e-07`), not a count;
* since 2022 (NCCL 2.13 resync): `redop root`, and `#wrong` = wrong elements (`%6g`, so a
  large count prints as `1e+06`); `N/A` with `-c 0` and in the alltoall in-place half;
* `-C 1`: the time columns are `cputime`; `-S 1`: a `timestamp` column (date and time, two
  words) after the in-place half; `-I 1`: i_min, i_max, i_p99, i_cv% after each half;
* trace replay prints no out-of-place half (blank), so such a row has only the in-place one.

Around the table: `# nccl-tests version ... nccl-library=22907` (2.17+), `# Collective test
starting: all_reduce_perf_mpi`, `#  Rank N [Group N] Pid ... on HOST device N [bus] MODEL`,
`# Out of bounds values : N OK|FAILED`, `# Avg bus bandwidth : X` (an average over the swept
sizes: reported, never compared), `Test NCCL failure file:line '...'` when a run aborts, and
`# Writing JSON output to PATH` with -J. Under `mpirun --tag-output` every line carries a
`[1,0]<stdout>:` prefix (`srun --label`: `0: `); NCCL INFO/WARN lines and other noise may
sit inside the table.

The JSON (`-J x.json`, nccl-tests 2.17.4+, format versions 1-3) is parsed from its known keys;
its `env` list (the whole environment of the run) is dropped unread. No real JSON capture
exists yet: its shape comes from src/util.cu only.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .results import NcclMeasurement, NcclResult, NcclRow, ProbeParseError

# `mpirun --tag-output` ("[1,0]<stdout>:") or `srun --label` ("0: ") in front of every line.
_MPI_TAG = re.compile(r"^(?:\[\d+,\d+\]<(stdout|stderr)>:|\s*\d+: )")
_RANK = re.compile(r"^#\s*Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+"
                   r"\[[^\]]*\]\s+(.*?)\s*$")
_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)(?:.*\bnccl-library=(\d+))?")
_STARTING = re.compile(r"^#\s*Collective test (?:starting|concluded):\s*(\S+)")
_VALIDATION = re.compile(r"\bvalidation:\s*(\d+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_JSON_PATH = re.compile(r"^#\s*Writing JSON output to\s+(.+?)\s*$")
_FAILURE = re.compile(r"\bTest (?:NCCL |CUDA )?failure\b|^#\s*error:")

# The columns a row starts with, before the first time column, and the measurement columns.
_TIME = ("time", "cputime")
_PER_ITER = ("i_min", "i_max", "i_p99", "i_cv%")
# A table printed without its header (cut output): the 2022+ layout, or the older one.
_DEFAULT_HEADERS = {
    13: ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
         "time", "algbw", "busbw", "#wrong"],
    12: ["size", "count", "type", "redop", "time", "algbw", "busbw", "error",
         "time", "algbw", "busbw", "error"],
}


def nccl_version(code: int) -> str:
    """NCCL_VERSION_CODE -> "2.29.7" (X*10000+Y*100+Z since 2.9, X*1000+Y*100+Z before)."""
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def collective_of(program: str) -> str:
    """"all_reduce_perf_mpi" or "/opt/nccl-tests/build/all_reduce_perf" -> "all_reduce"."""
    name = program.rsplit("/", 1)[-1]
    for suffix in ("_mpi", "_perf"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


class _Half:
    """Offsets of one measurement's columns inside its group (-1: the version has no such column)."""

    def __init__(self, names: list[str]) -> None:
        self.size = len(names)
        self.time = 0
        self.algbw = names.index("algbw") if "algbw" in names else -1
        self.busbw = names.index("busbw") if "busbw" in names else -1
        self.wrong = names.index("#wrong") if "#wrong" in names else -1
        self.error = names.index("error") if "error" in names else -1
        self.per_iter = [names.index(n) for n in _PER_ITER if n in names]


class _Layout:
    """Where each value of a row sits, from the header line's column names."""

    def __init__(self, names: list[str]) -> None:
        first_time = next(i for i, n in enumerate(names) if n in _TIME)
        self.preamble = names[:first_time]
        self.time_kind = names[first_time]
        self.timestamp = names[-1] == "timestamp"
        body = names[first_time: len(names) - (1 if self.timestamp else 0)]
        self.groups: list[list[str]] = []
        for name in body:
            if name in _TIME:
                self.groups.append([])
            self.groups[-1].append(name)
        self.halves = [_Half(g) for g in self.groups]
        self.width = len(self.preamble) + sum(len(g) for g in self.groups) + (2 if self.timestamp else 0)
        self.n_pre = len(self.preamble)
        self.i_count = self.preamble.index("count") if "count" in self.preamble else -1
        self.i_type = self.preamble.index("type") if "type" in self.preamble else -1
        self.i_redop = self.preamble.index("redop") if "redop" in self.preamble else -1
        self.i_root = self.preamble.index("root") if "root" in self.preamble else -1

    @staticmethod
    def from_header(line: str) -> _Layout | None:
        names = line.lstrip("#").split()
        if len(names) < 6 or names[0] != "size" or not any(n in _TIME for n in names):
            return None
        return _Layout(names)


def _measurement(half: _Half, tokens: list[str], pos: int) -> NcclMeasurement:
    wrong = error = None
    if half.wrong >= 0 and tokens[pos + half.wrong] != "N/A":
        wrong = float(tokens[pos + half.wrong])  # %6g: a large count prints as 1e+06
    if half.error >= 0 and tokens[pos + half.error] != "N/A":
        error = float(tokens[pos + half.error])
    per_iter = tuple(float(tokens[pos + i]) for i in half.per_iter)
    # getFloatStr() prints %.2f, %.1f, %.0f or %.1e to fit: 12646, 0.00, 1.2e+07 all parse
    return NcclMeasurement(float(tokens[pos]), float(tokens[pos + half.algbw]),
                           float(tokens[pos + half.busbw]),
                           wrong, error, per_iter)


def _row(tokens: list[str], layout: _Layout) -> NcclRow | None:
    """One table row, or None when its shape fits neither the full layout nor the trace-replay
    one (no out-of-place half). Older nccl-tests print the `redop` of a collective without one
    (all_gather, alltoall) as blanks: such a row has one field fewer, and the column is empty."""
    row = _row_as_printed(tokens, layout)
    if row is None and layout.i_redop >= 0 and len(tokens) > layout.i_redop \
            and _is_number(tokens[layout.i_redop]):
        row = _row_as_printed([*tokens[:layout.i_redop], "", *tokens[layout.i_redop:]], layout)
    return row


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _row_as_printed(tokens: list[str], layout: _Layout) -> NcclRow | None:
    n_pre = layout.n_pre
    halves = layout.halves
    stamp = 2 if layout.timestamp else 0
    n = len(tokens)
    if n == layout.width or n == layout.width - stamp:  # -S: a line may lack its timestamp
        used = halves
    elif len(halves) == 2 and n in (layout.width - halves[0].size, layout.width - halves[0].size - stamp):
        used = halves[1:]  # trace replay: the out-of-place half is blank
    else:
        return None
    try:
        size = int(tokens[0])
        count = int(tokens[layout.i_count]) if layout.i_count >= 0 else 0
        root = int(tokens[layout.i_root]) if layout.i_root >= 0 else None
        measured: list[NcclMeasurement] = []
        pos = n_pre
        for half in used:
            measured.append(_measurement(half, tokens, pos))
            pos += half.size
    except (IndexError, ValueError):
        return None
    dtype = tokens[layout.i_type] if layout.i_type >= 0 else ""
    redop = tokens[layout.i_redop] if layout.i_redop >= 0 else ""
    if len(measured) == 2:
        return NcclRow(size, count, dtype, redop, root, measured[0], measured[1])
    return NcclRow(size, count, dtype, redop, root, None, measured[0])


def parse_text(text: str, collective: str = "") -> NcclResult:
    """Parse nccl-tests' stdout. Raises ProbeParseError when there is neither a table nor a
    failure message in it."""
    result = NcclResult(collective=collective)
    layout: _Layout | None = None
    seen_header = False
    gpu_models: list[str] = []
    hosts: list[str] = []
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        tag = _MPI_TAG.match(line)
        if tag:
            line = line[tag.end():]
            if tag.group(1) == "stderr":  # srun --label does not tell stdout from stderr
                if _FAILURE.search(line):
                    result.errors.append(line.strip())
                continue
        stripped = line.strip()
        if not stripped:
            continue
        first = stripped[0]
        if first == "#":
            _comment(stripped, result, gpu_models, hosts)
            new = _Layout.from_header(stripped)
            if new is not None:
                layout, seen_header = new, True
            continue
        tokens = stripped.split() if first.isdigit() else []
        if not tokens or not tokens[0].isdigit():
            # NCCL INFO/WARN lines, X11 noise, `[sudo]` prompts, "10:3442:3442 [0] NCCL INFO"
            # (a numeric host name): not the table's, unless they report the run's failure
            if _FAILURE.search(stripped):
                result.errors.append(stripped)
            continue
        if layout is None:
            names = _DEFAULT_HEADERS.get(len(tokens))
            if names is None:
                continue  # no table yet: a number-led line of something else
            layout = _Layout(names)
        row = _row(tokens, layout)
        if row is None:
            result.skipped_lines += 1
            continue
        result.rows.append(row)
        if layout.time_kind == "cputime":
            result.time_kind = "cputime"
    result.gpu_models = tuple(gpu_models)
    result.hosts = tuple(hosts)
    if not result.rows and not result.errors and not seen_header:
        raise ProbeParseError("no nccl-tests table in the output", "no_table")
    return result


def _comment(line: str, result: NcclResult, gpu_models: list[str], hosts: list[str]) -> None:
    """The `#` lines around the table."""
    if m := _RANK.match(line):
        hosts.append(m.group(1))
        gpu_models.append(m.group(2))
    elif m := _OOB.match(line):
        result.out_of_bounds = int(m.group(1))
        result.footer = True
    elif m := _AVG.match(line):
        try:
            result.avg_busbw_gbps = float(m.group(1))
        except ValueError:
            pass
    elif m := _VERSION.match(line):
        result.tests_version = m.group(1)
        if m.group(2):
            result.nccl_version = nccl_version(int(m.group(2)))
    elif m := _STARTING.match(line):
        result.collective = collective_of(m.group(1))
    elif m := _JSON_PATH.match(line):
        result.json_path = m.group(1)
    elif line.startswith("# nThread") and (m := _VALIDATION.search(line)):
        result.validation = int(m.group(1))
    elif _FAILURE.search(line):
        result.errors.append(line)


# -- JSON ------------------------------------------------------------------------------------

def _json_number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ProbeParseError(f"nccl-tests JSON: {where} is not a number: {value!r}")
    if isinstance(value, str):
        if value.strip().lower() != "nan":  # jsonDouble writes NaN as the string "nan"
            raise ProbeParseError(f"nccl-tests JSON: {where} is not a number: {value!r}")
        return math.nan
    return float(value)


def _json_half(value: Any, where: str) -> NcclMeasurement | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ProbeParseError(f"nccl-tests JSON: {where} is not an object")
    time_key = "cpu_time" if "cpu_time" in value else "time"
    nwrong = value.get("nwrong")
    return NcclMeasurement(
        _json_number(value.get(time_key), f"{where}.{time_key}"),
        _json_number(value.get("alg_bw"), f"{where}.alg_bw"),
        _json_number(value.get("bus_bw"), f"{where}.bus_bw"),
        None if nwrong is None else _json_number(nwrong, f"{where}.nwrong"))


def _json_per_iter(row: dict[str, Any], key: str) -> tuple[float, ...]:
    stats = row.get(f"{key}_per_iter")
    if not isinstance(stats, dict):
        return ()
    try:
        return tuple(float(stats[k]) for k in ("min_us", "max_us", "p99_us", "cv_pct"))
    except (KeyError, TypeError, ValueError):
        return ()


def parse_json(text: str, collective: str = "") -> NcclResult:
    """Parse the file nccl-tests writes with `-J path.json`. The `env` list is never read."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ProbeParseError(f"nccl-tests JSON is not valid JSON: {exc}", "invalid_json") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise ProbeParseError("nccl-tests JSON: no `results` list", "no_table")
    result = NcclResult(collective=collective)
    args = doc.get("args")
    if isinstance(args, list) and args and isinstance(args[0], str):
        result.collective = collective_of(args[0])
    code = doc.get("nccl_version")
    if isinstance(code, int) and not isinstance(code, bool) and code > 0:
        result.nccl_version = nccl_version(code)
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    assert isinstance(config, dict)
    if isinstance(config.get("validation"), int):
        result.validation = config["validation"]
    devices = config.get("devices") if isinstance(config.get("devices"), list) else []
    assert isinstance(devices, list)
    result.gpu_models = tuple(str(d.get("device_info", "")) for d in devices if isinstance(d, dict))
    result.hosts = tuple(str(d.get("hostname", "")) for d in devices if isinstance(d, dict))
    for i, row in enumerate(doc["results"]):
        where = f"results[{i}]"
        if not isinstance(row, dict):
            raise ProbeParseError(f"nccl-tests JSON: {where} is not an object")
        try:
            size, count = int(row["size"]), int(row["count"])
            root_text = str(row.get("root", "")).strip()
            root = int(root_text) if root_text else None
        except (KeyError, TypeError, ValueError):
            raise ProbeParseError(f"nccl-tests JSON: {where} has no integer size/count/root") from None
        halves = []
        for key in ("out_of_place", "in_place"):
            half = _json_half(row.get(key), f"{where}.{key}")
            if half is not None and (stats := _json_per_iter(row, key)):
                half = NcclMeasurement(half.time_us, half.algbw_gbps, half.busbw_gbps, half.wrong,
                                       None, stats)
            halves.append(half)
        if "cpu_time" in (row.get("in_place") or {}):
            result.time_kind = "cputime"
        result.rows.append(NcclRow(size, count, str(row.get("type", "")), str(row.get("redop", "")), root,
                                   halves[0], halves[1]))
    oob = doc.get("out_of_bounds")
    if isinstance(oob, dict) and isinstance(oob.get("count"), int):
        result.out_of_bounds = oob["count"]
        result.footer = True
    # format version 1 spelled it average_bus_bandwidith / bandwidith (fixed in 85ca91d)
    avg = doc.get("average_bus_bandwidth", doc.get("average_bus_bandwidith"))
    if isinstance(avg, dict):
        value = avg.get("bandwidth", avg.get("bandwidith"))
        if isinstance(value, int | float) and not isinstance(value, bool):
            result.avg_busbw_gbps = float(value)
    errors = doc.get("errors")
    if isinstance(errors, list):
        result.errors.extend(str(e) for e in errors if e)
    return result


def parse(text: str, collective: str = "") -> NcclResult:
    """Text table or JSON, by the first character."""
    if text.lstrip()[:1] == "{":
        return parse_json(text, collective)
    return parse_text(text, collective)
