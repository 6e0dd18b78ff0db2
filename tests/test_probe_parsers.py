"""The nccl-tests and perftest parsers on every real output in shared/real/probes (exact values),
and on each format variant the tools' own output code can print (built here with the same printf
formats as NVIDIA/nccl-tests src/util.cu and src/common.cu, and linux-rdma/perftest
src/perftest_parameters.h; docs/probes.md cites the commits)."""

# The tables are printed with the tools' own C printf formats, so %-formatting is the point here.
# ruff: noqa: UP031

from __future__ import annotations

import json

import pytest

from helpers import real
from infrapulse.sources.probe import baseline, nccl, perftest
from infrapulse.sources.probe.results import GBIT, MIB, ProbeParseError


def text(name: str) -> str:
    return real("probes", name).read_text()


# -- nccl-tests: real outputs -------------------------------------------------------------------

def test_nccl_2node_h100_table_with_root_and_wrong_columns():
    r = nccl.parse(text("nccl-tests-allreduce-2node16gpu-h100-ztan.txt"), "all_reduce")
    assert r.collective == "all_reduce"
    assert len(r.rows) == 31
    first, last = r.rows[0], r.rows[-1]
    assert (first.size, first.elements, first.dtype, first.redop, first.root) == (8, 2, "float", "sum", -1)
    assert first.out_of_place is not None and first.in_place is not None
    assert (first.out_of_place.time_us, first.out_of_place.busbw_gbps, first.out_of_place.wrong) == \
        (135.8, 0.0, 0.0)
    assert first.in_place.time_us == 123.5
    assert last.size == 8589934592 and last.out_of_place is not None and last.in_place is not None
    assert (last.out_of_place.time_us, last.out_of_place.algbw_gbps, last.out_of_place.busbw_gbps) == \
        (47535.0, 180.71, 338.82)
    assert last.in_place.busbw_gbps == 337.35
    assert r.validation == 1 and r.out_of_bounds == 0 and r.footer
    assert r.avg_busbw_gbps == 70.742
    assert r.gpu_models == ("NVIDIA H100 80GB HBM3",) * 16
    assert r.nodes == 2 and set(r.hosts) == {"ztan-mig-235z", "ztan-mig-gq73"}
    assert not r.wrong_results and not r.errors and r.skipped_lines == 0


def test_nccl_old_table_without_root_with_error_column_and_c0():
    r = nccl.parse(text("nccl-tests-allreduce-old-noroot-c0-superbench.txt"), "all_reduce")
    assert len(r.rows) == 34  # two 0-byte rows, 4 B .. 8 GiB; the NCCL INFO line is not a row
    zero = r.rows[0]
    assert (zero.size, zero.elements, zero.root, zero.redop) == (0, 0, None, "sum")
    assert zero.out_of_place is not None and zero.out_of_place.time_us == 35.20
    assert zero.out_of_place.wrong is None and zero.out_of_place.max_error is None  # N/A
    row_4m = next(row for row in r.rows if row.size == 4194304)
    assert row_4m.out_of_place is not None and row_4m.out_of_place.time_us == 112.0
    assert row_4m.out_of_place.busbw_gbps == 65.52
    assert r.rows[-1].in_place is not None and r.rows[-1].in_place.time_us == 63959.0
    assert r.validation == 0 and r.out_of_bounds == 0 and r.avg_busbw_gbps == 68.4048
    assert r.gpu_models == ("A100-SXM4-40GB",) * 8 and r.hosts == ("localhost",) * 8
    assert not r.wrong_results and r.skipped_lines == 0


def test_nccl_v218_under_mpirun_tag_output():
    r = nccl.parse(text("nccl-tests-allreduce-v2.18-mpitag-ncclebpf.txt"))
    assert r.collective == "all_reduce"  # from "# Collective test starting: all_reduce_perf_mpi"
    assert (r.tests_version, r.nccl_version) == ("2.18.0", "2.29.7")
    assert [row.size for row in r.rows] == [1048576 << i for i in range(8)]
    big = r.rows[-1]
    assert big.out_of_place is not None and big.in_place is not None
    assert (big.out_of_place.time_us, big.out_of_place.busbw_gbps) == (58479.5, 2.30)
    assert big.in_place.time_us == 58055.4
    assert r.avg_busbw_gbps == 1.57614 and r.out_of_bounds == 0
    assert r.hosts == ("lab", "lab")
    assert not r.errors  # the Authorization lines on stderr are noise, not failures


def test_nccl_under_srun_label_reads_like_the_plain_table():
    plain = text("nccl-tests-allreduce-2node16gpu-h100-ztan.txt")
    labelled = "".join(f"{i % 2}: {line}\n" for i, line in enumerate(plain.splitlines()))
    assert nccl.parse(labelled).rows == nccl.parse(plain).rows
    assert len(nccl.parse(labelled).rows) == 31


def test_nccl_alltoall_in_place_wrong_is_na():
    r = nccl.parse(text("nccl-tests-alltoall-1gpu-inplaceNA-issue287.txt"))
    (row,) = r.rows
    assert (row.size, row.redop, row.root) == (33554432, "none", -1)
    assert row.out_of_place is not None and row.in_place is not None
    assert (row.out_of_place.time_us, row.out_of_place.algbw_gbps, row.out_of_place.wrong) == \
        (19.56, 1715.44, 0.0)
    assert (row.in_place.time_us, row.in_place.algbw_gbps, row.in_place.wrong) == (0.78, 43046.10, None)
    assert r.avg_busbw_gbps == 0.0 and not r.wrong_results


def test_nccl_aborted_run_reports_the_failure_and_no_rows():
    r = nccl.parse(text("nccl-tests-allreduce-testfailure-c0-issue124.txt"))
    assert r.rows == [] and not r.footer
    assert r.errors[0] == "ArchLinux: Test NCCL failure all_reduce.cu:44 'unhandled cuda error / '"
    assert len(r.errors) == 7 and r.errors[-1].endswith("Test failure common.cu:842")
    assert r.gpu_models == ("NVIDIA GeForce RTX 3090",) * 2


def test_nccl_text_without_any_table_is_an_error():
    with pytest.raises(ProbeParseError) as exc:
        nccl.parse("bash: all_reduce_perf: command not found\n")
    assert exc.value.reason == "no_table"


# -- nccl-tests: variants printed by the upstream format strings ---------------------------------

def _fstr(value: float, width: int) -> str:
    """getFloatStr() of src/util.cu."""
    for fmt in ("%*.2f", "%*.1f", "%*.0f"):
        out = fmt % (width, value)
        if len(out) <= width:
            return out
    return ("%*.1e" if width >= 7 else "%*.0e") % (width, value)


def _preamble(size: int, count: int, root: int = -1) -> str:
    return "%12li  %12li  %8s  %6s  %6s" % (size, count, "float", "sum", "%6i" % root)


def _body(t: float, alg: float, bus: float, wrong: float | None) -> str:
    if wrong is None:
        return "  %7s  %6s  %6s    N/A" % (_fstr(t, 7), _fstr(alg, 6), _fstr(bus, 6))
    return "  %7s  %6s  %6s  %6g" % (_fstr(t, 7), _fstr(alg, 6), _fstr(bus, 6), wrong)


def _header(time: str = "time", stamp: bool = False) -> str:
    pad, lbl, fmt = (19, "timestamp", "%Y-%m-%d %H:%M:%S") if stamp else (0, "", "")
    return ("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n"
            % ("size", "count", "type", "redop", "root", time, "algbw", "busbw", "#wrong", time, "algbw",
               "busbw", "#wrong", pad, lbl)
            + "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n"
            % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
               "", pad, fmt))


def test_nccl_wrong_elements_large_count_and_out_of_bounds_failed():
    out = (_header() + _preamble(8, 2) + _body(30.1, 0.0, 0.0, 1e6) + _body(29.9, 0.0, 0.0, 0) + "\n"
           + "# Out of bounds values : 1 FAILED\n# Avg bus bandwidth    : 0.00123 \n")
    r = nccl.parse_text(out)
    (row,) = r.rows
    assert row.out_of_place is not None and row.out_of_place.wrong == 1e6  # printed "1e+06"
    assert r.out_of_bounds == 1 and r.wrong_results


def test_nccl_cputime_columns():
    out = _header("cputime") + _preamble(1 << 20, 262144) + _body(15.21, 68.9, 120.6, 0) \
        + _body(15.0, 69.9, 122.3, 0) + "\n"
    r = nccl.parse_text(out)
    assert r.time_kind == "cputime" and r.rows[0].out_of_place is not None
    assert r.rows[0].out_of_place.time_us == 15.21


def test_nccl_timestamp_column_is_two_words():
    out = _header(stamp=True) + _preamble(64, 16) + _body(40.5, 0.0, 0.0, 0) + _body(40.1, 0.0, 0.0, 0) \
        + "%21s" % "2026-07-09 16:03:21" + "\n"
    (row,) = nccl.parse_text(out).rows
    assert row.in_place is not None and row.in_place.time_us == 40.1 and row.in_place.wrong == 0


def test_nccl_per_iteration_columns():
    half = ("time", "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%")
    head = ("# %10s  %12s  %8s  %6s  %6s" % ("size", "count", "type", "redop", "root")
            + "  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s" % half * 2 + " %*s\n" % (0, ""))
    stats = "  %7s  %7s  %7s  %7s" % (_fstr(20.0, 7), _fstr(31.5, 7), _fstr(30.2, 7), _fstr(3.4, 7))
    out = head + _preamble(8, 2) + _body(21.0, 0, 0, 0) + stats + _body(20.5, 0, 0, 0) + stats + "\n"
    (row,) = nccl.parse_text(out).rows
    assert row.out_of_place is not None and row.out_of_place.per_iter == (20.0, 31.5, 30.2, 3.4)
    assert row.in_place is not None and row.in_place.time_us == 20.5


def test_nccl_pre_2022_error_column_is_a_deviation_not_a_count():
    head = ("# %10s  %12s  %8s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n"
            % ("size", "count", "type", "redop", "time", "algbw", "busbw", "error", "time", "algbw", "busbw",
               "error"))
    row = "%12li  %12li  %8s  %6s" % (4096, 1024, "float", "sum") \
        + "  %7s  %6.2f  %6.2f  %5.0le" % ("%7.2f" % 36.11, 0.11, 0.20, 2e-07) * 2 + "\n"
    r = nccl.parse_text(head + row + "# Out of bounds values : 0 OK\n")
    m = r.rows[0].out_of_place
    assert m is not None and m.max_error == 2e-07 and m.wrong is None and not r.wrong_results


def test_nccl_old_broadcast_has_root_instead_of_redop():
    head = ("# %10s  %12s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n"
            % ("size", "count", "type", "root", "time", "algbw", "busbw", "error", "time", "algbw", "busbw",
               "error"))
    row = "%12li  %12li  %6s  %6i" % (1024, 256, "float", 0) + "  %7s  %6.2f  %6.2f  %5.0le" % (
        "  25.10", 0.04, 0.04, 0.0) * 2 + "\n"
    (parsed,) = nccl.parse_text(head + row).rows
    assert (parsed.redop, parsed.root) == ("", 0)


def test_nccl_trace_replay_row_has_only_the_in_place_half():
    out = _header() + _preamble(8, 2) + " " * 32 + _body(9.5, 0, 0, 0) + "\n"
    (row,) = nccl.parse_text(out).rows
    assert row.out_of_place is None and row.in_place is not None and row.in_place.time_us == 9.5


def test_nccl_malformed_rows_are_counted_not_silently_dropped():
    out = (_header() + _preamble(8, 2) + _body(9.5, 0, 0, 0) + _body(9.4, 0, 0, 0) + "\n"
           + "16 4 float sum -1 12.0 oops\n"
           + _preamble(32, 8) + _body(9.5, 0, 0, 0) + "  x.y  0.00  0.00  0\n")
    r = nccl.parse_text(out)
    assert len(r.rows) == 1 and r.skipped_lines == 2


def test_nccl_json_path_line_and_nccl_version_code_before_2_9():
    out = "# Writing JSON output to /tmp/run/result.json.0\n" + _header() + \
        _preamble(8, 2) + _body(9.5, 0, 0, 0) + _body(9.4, 0, 0, 0) + "\n"
    assert nccl.parse_text(out).json_path == "/tmp/run/result.json.0"
    assert nccl.nccl_version(2708) == "2.7.8" and nccl.nccl_version(21505) == "2.15.5"


def _json_doc(**over: object) -> dict:
    doc = {
        "version": 3, "start_time": "2026-07-09 16:03:21",
        "args": ["/opt/nccl-tests/build/all_reduce_perf", "-b", "8", "-e", "32K", "-J", "x.json"],
        "env": ["SECRET_TOKEN=hunter2", "PATH=/usr/bin"], "nccl_version": 22907,
        "config": {"nthreads": 1, "ngpus": 8, "minimum_bytes": 8, "maximum_bytes": 32768, "step_factor": 2,
                   "validation": 1, "devices": [{"rank": 0, "group": 0, "pid": 11, "hostname": "gpu-01",
                                                 "device": 0, "device_hex": "0000:04:00",
                                                 "device_info": "NVIDIA H100 80GB HBM3"}]},
        "results": [{"size": 8, "count": 2, "type": "float", "redop": "sum", "root": "    -1",
                     "out_of_place": {"time": 17.25, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 0.0},
                     "in_place": {"time": 17.0, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 0.0},
                     "actual_iterations": 20, "experiment_name": ""}],
        "out_of_bounds": {"count": 0, "okay": "true"},
        "average_bus_bandwidth": {"bandwidth": 0.0, "okay": "unchecked"},
        "errors": [], "end_time": "2026-07-09 16:03:22",
    }
    doc.update(over)
    return doc


def test_nccl_json_v3():
    r = nccl.parse(json.dumps(_json_doc()))
    assert r.collective == "all_reduce" and r.nccl_version == "2.29.7" and r.validation == 1
    (row,) = r.rows
    assert (row.size, row.elements, row.root) == (8, 2, -1)
    assert row.out_of_place is not None and row.out_of_place.time_us == 17.25
    assert row.out_of_place.wrong == 0.0
    assert r.gpu_models == ("NVIDIA H100 80GB HBM3",) and r.out_of_bounds == 0
    assert "hunter2" not in repr(r)  # the env block is never kept


def test_nccl_json_v1_typos_cputime_nan_and_null_nwrong():
    doc = _json_doc(version=1)
    del doc["average_bus_bandwidth"]
    doc["average_bus_bandwidith"] = {"bandwidith": 12.5, "okay": "unchecked"}
    doc["results"][0]["out_of_place"] = {"cpu_time": 20.0, "alg_bw": "nan", "bus_bw": 0.0, "nwrong": None}
    doc["results"][0]["in_place"] = {"cpu_time": 19.0, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": None}
    r = nccl.parse(json.dumps(doc))
    m = r.rows[0].out_of_place
    assert m is not None and m.time_us == 20.0 and m.wrong is None and m.algbw_gbps != m.algbw_gbps
    assert r.time_kind == "cputime" and r.avg_busbw_gbps == 12.5


def test_nccl_json_truncated_or_wrong_shape_is_a_clear_error():
    with pytest.raises(ProbeParseError, match="not valid JSON"):
        nccl.parse(json.dumps(_json_doc())[:200])
    bad = _json_doc()
    bad["results"][0]["out_of_place"]["time"] = "fast"
    with pytest.raises(ProbeParseError, match=r"results\[0\].out_of_place.time"):
        nccl.parse(json.dumps(bad))


# -- perftest: real outputs ---------------------------------------------------------------------

def test_perftest_read_lat_roce_with_cpu_frequency_lines_inside_the_table():
    (r,) = perftest.parse(text("perftest-ib_read_lat-roce-cpufreq-spiderpool.txt"))
    assert (r.test, r.kind, r.device, r.link_type, r.role) == ("ib_read_lat", "lat", "mlx5_0", "Ethernet",
                                                                "client")
    (row,) = r.rows
    assert (row.size, row.iterations) == (2, 1000)
    assert row.latency_us == {"t_min": 6.88, "t_max": 16.81, "t_typical": 7.04, "t_avg": 7.06,
                              "t_stdev": 0.31, "p99": 7.38, "p99_9": 16.81}
    assert r.skipped_lines == 0


def test_perftest_write_bw_mb_per_sec_client_and_server():
    client, server = perftest.parse(text("perftest-ib_write_bw-8M-srvcli-mbsec-superbench.txt"))
    assert (client.role, server.role) == ("client", "server")
    for r in (client, server):
        assert (r.test, r.device, r.link_type, r.bw_unit) == ("ib_write_bw", "ib0", "IB", "MB/sec")
        (row,) = r.rows
        assert (row.size, row.iterations) == (8388608, 20000)
        assert row.bandwidth["peak"] == pytest.approx(24056.74 * MIB)
        assert row.bandwidth["average"] == pytest.approx(24056.72 * MIB)
        assert row.msg_rate == pytest.approx(0.003007e6)


def test_perftest_write_bw_gbits_four_qps():
    (r,) = perftest.parse(text("perftest-ib_write_bw-q4-gbits-rdmacm-sparkvllm.txt"))
    assert (r.device, r.bw_unit) == ("rocep1s0f1", "Gb/sec")
    (row,) = r.rows
    assert row.size == 65536 and row.bandwidth["average"] == pytest.approx(111.71 * GBIT)
    assert row.bandwidth["peak"] == pytest.approx(13.965e9) and row.msg_rate == pytest.approx(213070.0)


def test_perftest_under_a_launcher_prefix():
    plain = text("perftest-ib_read_lat-roce-cpufreq-spiderpool.txt")
    for prefix in ("0: ", "[1,0]<stdout>:"):
        (r,) = perftest.parse("".join(f"{prefix}{line}\n" for line in plain.splitlines()))
        assert r.device == "mlx5_0" and r.rows[0].latency_us["p99"] == 7.38


def test_perftest_write_lat_rdma_cm():
    (r,) = perftest.parse(text("perftest-ib_write_lat-rdmacm-sparkvllm.txt"))
    assert (r.test, r.device) == ("ib_write_lat", "rocep1s0f1")
    (row,) = r.rows
    assert row.latency_us["t_typical"] == 1.47 and row.latency_us["p99"] == 1.57
    assert row.latency_us["p99_9"] == 1.93 and row.latency_us["t_stdev"] == 0.0


def test_perftest_pre_2024_json_with_unquoted_keys():
    (r,) = perftest.parse(text("perftest-ib_write_lat-outjson-unquoted-issue216.json"))
    assert (r.test, r.kind, r.device, r.link_type, r.source_format) == (
        "ib_write_lat", "lat", "rxe0", "Ethernet", "json-legacy")
    (row,) = r.rows
    assert (row.size, row.iterations) == (128, 5000)
    assert row.latency_us == {"t_min": 2.37, "t_max": 5.39, "t_typical": 2.42, "t_avg": 2.42,
                              "t_stdev": 0.05, "p99": 2.47, "p99_9": 4.03}


# -- perftest: variants ---------------------------------------------------------------------------

LINE = "-" * 87 + "\n"
TITLE_LAT = "                    RDMA_Write Latency Test\n"


def _bw_report(header: str, row: str, title: str = "RDMA_Write BW Test") -> str:
    return (LINE + "                    " + title + "\n"
            + " Dual-port       : OFF\t\tDevice         : mlx5_2\n Link type       : IB\n" + LINE
            + header + "\n" + row + "\n" + LINE)


def test_perftest_current_json_gbits():
    doc = {"test_info": {"test": "RDMA_Write_BW_Test", "Device": "mlx5_3", "Link_type": "Ethernet"},
           "results": {"MsgSize": 65536, "n_iterations": 5000, "BW_peak": 97.12, "BW_average": 96.5,
                       "MsgRate": 0.184}}
    (r,) = perftest.parse(json.dumps(doc), gbits=True)
    assert (r.test, r.kind, r.device, r.source_format) == ("ib_write_bw", "bw", "mlx5_3", "json")
    assert r.rows[0].bandwidth == {"peak": pytest.approx(97.12 * GBIT), "average": pytest.approx(96.5 * GBIT)}
    assert r.rows[0].msg_rate == pytest.approx(184000.0)


def test_perftest_qos_json_keeps_its_unquoted_sl_key():
    body = ('{\n"test_info": {\n"test": "RDMA_Write_BW_Test",\n"Device": "mlx5_0"\n},\n"results": {\n'
            '"MsgSize": 65536,\nsl: 3,\n"n_iterations": 5000,\n"BW_peak": 11000.50,\n'
            '"BW_average": 10990.25,\n "MsgRate": 0.175844\n}\n}\n')
    (r,) = perftest.parse(body)
    assert r.source_format == "json-legacy"
    assert r.rows[0].bandwidth["average"] == pytest.approx(10990.25 * MIB)


def test_perftest_mib_per_sec_per_port_and_cpu_util():
    header = (" #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]   "
              "BW Port1[MiB/sec]   MsgRate Port1[Mpps]   BW Port2[MiB/sec]   MsgRate Port2[Mpps]")
    row = (" %-7lu    %-10d     %-7.2f            %-7.2f\t\t   %-7.6f        %-7.2f            %-7.6f   "
           "           %-7.2f            %-7.6f"
           % (4096, 5000, 9000.5, 8999.25, 2.3, 4500.1, 1.15, 4499.2, 1.15))
    (r,) = perftest.parse(_bw_report(header, row))
    assert r.bw_unit == "MiB/sec" and r.rows[0].bandwidth["average"] == pytest.approx(8999.25 * MIB)
    assert r.rows[0].msg_rate == pytest.approx(2.3e6)
    cpu = perftest.parse(_bw_report(" #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   "
                                    "MsgRate[Mpps]    CPU_Util[%]",
                                    " 65536      5000           11000.00            10990.00\t\t   0.175840"
                                    "\t    12.50"))
    assert cpu[0].rows[0].bandwidth["average"] == pytest.approx(10990.0 * MIB)


def test_perftest_pre_2016_latency_table_and_duration_mode():
    old = (LINE + TITLE_LAT + " Dual-port       : OFF\t\tDevice         : mlx4_0\n"
           + LINE + " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]\n"
           + " %-7lu %d          %-7.2f        %-7.2f      %-7.2f\n" % (2, 1000, 0.89, 5.51, 0.92) + LINE)
    (r,) = perftest.parse(old)
    assert r.rows[0].latency_us == {"t_min": 0.89, "t_max": 5.51, "t_typical": 0.92}
    dur = (LINE + TITLE_LAT + " Dual-port       : OFF\t\tDevice         : mlx5_0\n"
           + " #bytes        #iterations       t_avg[usec]    tps average\n"
           + " %-7lu       %d            %-7.2f        %-7.2f\n" % (2, 2500000, 1.21, 411000.55))
    (d,) = perftest.parse(dur)
    assert d.rows[0].latency_us == {"t_avg": 1.21} and d.rows[0].iterations == 2500000


def test_perftest_histogram_lines_and_malformed_rows():
    out = (LINE + TITLE_LAT + " Dual-port       : OFF\t\tDevice         : mlx5_0\n"
           + "#, usec\n1, 1.21\n2, 1.25\n"
           + " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
             "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
           + " 2       1000          1.42           1.93         1.47                1.47             0.00\n"
           + " 2       1000          1.42           1.93         1.47                1.47             0.00"
             "            1.57                    1.93\n")
    (r,) = perftest.parse(out)
    assert len(r.rows) == 1 and r.skipped_lines == 1


def test_perftest_output_without_a_report_is_an_error():
    with pytest.raises(ProbeParseError) as exc:
        perftest.parse(" Couldn't connect to 10.0.0.2:18515\n"
                       "Unable to open file descriptor for socket connection")
    assert exc.value.reason == "no_table"
    with pytest.raises(ProbeParseError, match="line 3"):
        perftest.parse("{\ntest_info: {\n!!!\n")


# Older nccl-tests (the pre-2022 layout) print the redop of a collective without one as blanks:
# the header names `redop`, the rows have one field fewer (issue 34). Shaped as all_gather_perf
# of that era prints it (getFloatStr widths, `error` columns, N/A under -c 0).
OLD_ALLGATHER = """\
# nThread 1 nGpus 8 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20 validation: 0
#
#                                             out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             0   float             31.48    0.00    0.00    N/A    31.09    0.00    0.00    N/A
         256             8   float             33.02    0.01    0.01    N/A    32.73    0.01    0.01    N/A
        1024            32   float             34.10    0.03    0.03    N/A    33.96    0.03    0.03    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.0133333
#
"""


def test_an_old_table_with_a_blank_redop_column_reads_every_row():
    r = nccl.parse(OLD_ALLGATHER, "all_gather")
    assert r.skipped_lines == 0 and not r.errors and not r.wrong_results
    assert [(row.size, row.elements, row.dtype, row.redop, row.root) for row in r.rows] == [
        (8, 0, "float", "", None), (256, 8, "float", "", None), (1024, 32, "float", "", None)]
    first = r.rows[0]
    assert first.out_of_place is not None and first.in_place is not None
    assert (first.out_of_place.time_us, first.in_place.time_us) == (31.48, 31.09)
    assert r.rows[2].out_of_place.busbw_gbps == 0.03 and r.rows[2].out_of_place.max_error is None


# ib_write_bw --run_infinitely: the peak is not measured (its column prints 0.00) and a row is
# printed per interval for the one size (issue 34). Shaped as perftest prints it.
RUN_INFINITELY = """\
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF\t\tDevice         : mlx5_0
 Number of qps   : 1\t\tTransport type : IB
 Connection type : RC\t\tUsing SRQ      : OFF
 Link type       : Ethernet
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 BW peak won't be measured in this run.
 65536      1185063          0.00               12343.32\t\t   0.197493
 65536      1185150          0.00               12344.22\t\t   0.197507
 65536      1185001          0.00               12340.00\t\t   0.197440
"""


def test_run_infinitely_has_no_peak_and_is_one_observation():
    [report] = perftest.parse(RUN_INFINITELY)
    assert report.peak_measured is False and len(report.rows) == 3
    assert all("peak" not in row.bandwidth for row in report.rows)
    averages = [round(row.bandwidth["average"] / 2**20, 2) for row in report.rows]
    assert averages == [12343.32, 12344.22, 12340.0]
    observations = baseline.perftest_observations(report, "pair", "loop")
    assert [(o.metric, o.size, round(o.value / 2**20, 2)) for o in observations] == [
        ("bandwidth", 65536, 12343.32)]  # the median of the three intervals, one run
