"""Property tests for the nccl-tests and perftest parsers: on any text they return a result or
raise ProbeParseError, nothing else; tables printed with the tools' own printf formats read back
to the printed values; noise lines inside a table (NCCL INFO, CPU frequency warnings, MPI tags)
change nothing."""

# The tables are printed with the tools' own C printf formats, so %-formatting is the point here.
# ruff: noqa: UP031

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infrapulse.sources.probe import nccl, perftest
from infrapulse.sources.probe.results import MIB, ProbeParseError

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text that looks like the tools' output: their words, digits, separators and odd bytes.
WORDS = st.sampled_from(["#", "size", "count", "time", "cputime", "algbw", "busbw", "#wrong", "error",
                         "N/A", "float", "sum", "-1", "timestamp", "#bytes", "#iterations", "BW peak[MB/sec]",
                         "t_min[usec]", "99% percentile[usec]", "RDMA_Write", "BW", "Latency", "Test",
                         "Device", ":", "{", "}", ",", "test_info:", "results:", "MsgSize:", "1e+06", "nan",
                         "[1,0]<stdout>:", "Out of bounds values", "Test NCCL failure", "\t", "  "])
TEXTISH = st.lists(st.one_of(WORDS, st.integers(-5, 10**12).map(str), st.floats(allow_nan=True).map(str),
                             st.text(max_size=8)), max_size=60).map(" ".join)
LINES = st.lists(TEXTISH, max_size=30).map("\n".join)


@SETTINGS
@given(LINES)
def test_nccl_parse_returns_or_raises_its_error(text: str) -> None:
    try:
        result = nccl.parse(text)
    except ProbeParseError:
        return
    for row in result.rows:
        assert row.size >= 0 and (row.out_of_place is not None or row.in_place is not None)


@SETTINGS
@given(LINES)
def test_perftest_parse_returns_or_raises_its_error(text: str) -> None:
    try:
        results = perftest.parse(text)
    except ProbeParseError:
        return
    assert results and all(r.rows for r in results)


@SETTINGS
@given(st.text(max_size=400))
def test_both_parsers_on_arbitrary_unicode(text: str) -> None:
    for parse in (nccl.parse, perftest.parse):
        try:
            parse(text)
        except ProbeParseError:
            pass


# -- round trips through the upstream printf formats ----------------------------------------------

def _fstr(value: float, width: int) -> str:
    for fmt in ("%*.2f", "%*.1f", "%*.0f"):
        out = fmt % (width, value)
        if len(out) <= width:
            return out
    return ("%*.1e" if width >= 7 else "%*.0e") % (width, value)


HEADER = ("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n"
          % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
             "busbw", "#wrong"))
NOISE = st.sampled_from(["gpu-01:3442:3442 [0] NCCL INFO Launch mode Parallel",
                         "10:3442:3442 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE",
                         "Authorization required, but no authorization protocol specified", ""])
MEASURE = st.tuples(st.floats(0.01, 1e8), st.floats(0, 9e4), st.floats(0, 9e4),
                    st.one_of(st.none(), st.integers(0, 10**9)))
ROW = st.tuples(st.integers(0, 2**40), st.integers(0, 2**38), st.integers(-1, 7), MEASURE, MEASURE)


def _close(parsed: float, printed: str) -> bool:
    return parsed == float(printed)


@SETTINGS
@given(st.lists(st.tuples(ROW, st.lists(NOISE, max_size=2)), min_size=1, max_size=12),
       st.booleans())
def test_nccl_rows_read_back_what_was_printed(rows, mpi_tag: bool) -> None:
    lines = [HEADER.rstrip("\n")]
    printed = []
    for (size, count, root, oop, inp), noise in rows:
        body = ""
        halves = []
        for t, alg, bus, wrong in (oop, inp):
            cells = (_fstr(t, 7), _fstr(alg, 6), _fstr(bus, 6))
            wrong_text = "N/A" if wrong is None else "%6g" % wrong
            body += "  %7s  %6s  %6s  %6s" % (*cells, wrong_text)
            halves.append((*cells, wrong_text))
        lines.append("%12li  %12li  %8s  %6s  %6s" % (size, count, "float", "sum", "%6i" % root) + body)
        lines.extend(noise)
        printed.append((size, count, root, halves))
    lines.append("# Out of bounds values : 0 OK")
    if mpi_tag:
        lines = ["[1,0]<stdout>:" + line for line in lines]
    result = nccl.parse_text("\n".join(lines) + "\n")
    assert result.skipped_lines == 0 and len(result.rows) == len(printed)
    for row, (size, count, root, halves) in zip(result.rows, printed):
        assert (row.size, row.elements, row.root) == (size, count, root)
        for got, (t, alg, bus, wrong) in zip((row.out_of_place, row.in_place), halves):
            assert got is not None
            assert _close(got.time_us, t) and _close(got.algbw_gbps, alg) and _close(got.busbw_gbps, bus)
            assert got.wrong == (None if wrong == "N/A" else float(wrong))


@SETTINGS
@given(st.lists(st.tuples(st.integers(1, 2**30), st.integers(1, 10**7),
                          st.lists(st.floats(0.01, 9e5), min_size=7, max_size=7)), min_size=1, max_size=8),
       st.lists(st.sampled_from(["Conflicting CPU frequency values detected: 2200.000000 != 1040.353000. "
                                 "CPU Frequency is not max.", "#, usec"]), max_size=3))
def test_perftest_latency_rows_read_back(rows, noise) -> None:
    out = ["                    RDMA_Write Latency Test", " Device         : mlx5_0",
           " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
           "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "] + noise
    for size, iters, values in rows:
        out.append(" %-7lu %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f"
                   "\t\t%-7.2f \t\t%-7.2f" % (size, iters, *values))
    (r,) = perftest.parse("\n".join(out))
    assert len(r.rows) == len(rows)
    for row, (size, iters, values) in zip(r.rows, rows):
        assert (row.size, row.iterations) == (size, iters)
        assert list(row.latency_us.values()) == [float("%.2f" % v) for v in values]


KEYS = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz_ABC"), min_size=1, max_size=12)


@SETTINGS
@given(st.dictionaries(KEYS, st.one_of(st.integers(0, 10**6), st.sampled_from(["ON", "OFF", "IB", "RC"])),
                       max_size=8),
       st.integers(1, 2**20), st.floats(0.01, 1e5))
def test_perftest_legacy_json_reads_back(info, size, bw) -> None:
    lines = ["{", "test_info: {", "test: RDMA_Write_BW_Test,"]
    lines += [f"{k}: {v}," for k, v in info.items()]
    lines += ["},", "results: {", f"MsgSize: {size},", "n_iterations: 5000,", f"BW_peak: {bw:.2f},",
              f"BW_average: {bw:.2f},", "MsgRate: 0.100000,", "},", "}"]
    (r,) = perftest.parse("\n".join(lines))
    assert r.source_format == "json-legacy" and r.test == "ib_write_bw"
    assert r.rows[0].size == size and r.rows[0].bandwidth["average"] == float(f"{bw:.2f}") * MIB
    standard = json.dumps({"test_info": {"test": "RDMA_Write_BW_Test", **info},
                           "results": {"MsgSize": size, "BW_average": float(f"{bw:.2f}")}})
    (s,) = perftest.parse(standard)
    assert s.source_format == "json" and s.rows[0].bandwidth == {"average": r.rows[0].bandwidth["average"]}
