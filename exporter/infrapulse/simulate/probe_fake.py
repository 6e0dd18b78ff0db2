"""Fake `all_reduce_perf`, `ib_write_lat` and `ib_write_bw` for the demo and the tests.

    python -m infrapulse.simulate.probe_fake all_reduce_perf -b 8 -e 32K -f 2 -g 8
    python -m infrapulse.simulate.probe_fake ib_write_lat -d mlx5_1 -p 18515          # server
    python -m infrapulse.simulate.probe_fake ib_write_lat -d mlx5_0 -p 18515 127.0.0.1  # client

They print what the real tools print, with the tools' own printf formats (nccl-tests 2.18
src/util.cu: writeDeviceReport, writeResultHeader, writeBenchmarkLine*, writeResultFooter;
perftest src/perftest_parameters.h: RESULT_FMT*, REPORT_FMT*, and the JSON of
print_full_bw_report / write_report_lat_to_file, before and after f9e82f7), and the JSON files of
`-J` and `--out_json`. The perftest server listens on its TCP port and reports once a client
connected; a client with no server prints perftest's "Couldn't connect" and exits 1.

What they measure comes from a JSON state file named by $INFRAPULSE_PROBE_FAKE (the demo's
scenarios rewrite it): latency and bandwidth factors, wrong results, a failure, a hang (which
also starts a child process, so a timeout must kill the whole process group). Each run adds one
line to `<state>.runs`, so the demo can tell how many runs a firmware version has had.
"""

# Output is printed with the tools' own C printf formats: %-formatting is the point here.
# ruff: noqa: UP031

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

STATE_ENV = "INFRAPULSE_PROBE_FAKE"
DEFAULTS: dict[str, Any] = {
    "hostname": "gpu-node-01", "gpus": 8, "gpu_model": "NVIDIA H100 80GB HBM3",
    "tests_version": "2.18.0", "nccl_version_code": 22907,
    "small_latency_factor": 1.0,  # nccl sizes <= 64 KiB and every RDMA latency
    "busbw_factor": 1.0, "rdma_bw_factor": 1.0,
    "wrong": False, "fail": False, "hang": False, "json_legacy": False, "cpu_freq_warning": False,
    "link_type": "IB", "seed": 7,
}
SMALL = 64 << 10
RESULT_LINE = "-" * 87


def load_state() -> dict[str, Any]:
    path = os.environ.get(STATE_ENV, "")
    state = dict(DEFAULTS)
    if path and Path(path).is_file():
        state.update(json.loads(Path(path).read_text()))
    return state


def count_run(tool: str) -> None:
    path = os.environ.get(STATE_ENV, "")
    if path:
        with open(f"{path}.runs", "a", encoding="utf-8") as f:
            f.write(f"{tool} {time.time():.3f}\n")


def hang(marker: str) -> None:
    """Never finish, with a child in the same process group (as MPI launchers have)."""
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", marker])
    print("# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20", flush=True)
    time.sleep(3600)


# -- nccl-tests ------------------------------------------------------------------------------

def parse_size(text: str) -> int:
    """nccl-tests' parsesize(): binary K/M/G suffixes."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    if text[-1:].lower() in units:
        return int(float(text[:-1]) * units[text[-1].lower()])
    return int(float(text))


def float_str(value: float, width: int) -> str:
    """getFloatStr() of src/util.cu."""
    for fmt in ("%*.2f", "%*.1f", "%*.0f"):
        out = fmt % (width, value)
        if len(out) <= width:
            return out
    return ("%*.1e" if width >= 7 else "%*.0e") % (width, value)


def nccl_time_us(size: int, ranks: int, state: dict[str, Any], rng: random.Random) -> float:
    """A single-node NVLink all-reduce: ~18 us of latency, ~360 GB/s of bus bandwidth."""
    latency: float = 18.0 * (state["small_latency_factor"] if size <= SMALL else 1.0)
    busbw: float = 360e9 * state["busbw_factor"]
    factor = 2 * (ranks - 1) / ranks if ranks > 1 else 1.0
    return (latency + size * factor / busbw * 1e6) * rng.uniform(0.99, 1.01)


def all_reduce_perf(argv: list[str], state: dict[str, Any]) -> int:
    p = argparse.ArgumentParser(prog="all_reduce_perf", add_help=False)
    for flag, default in (("-b", "32M"), ("-e", "32M"), ("-f", "1"), ("-g", "1"), ("-t", "1"), ("-c", "1"),
                          ("-n", "20"), ("-w", "5"), ("-C", "0"), ("-J", ""), ("-d", "float"), ("-o", "sum")):
        p.add_argument(flag, default=default)
    args, _ = p.parse_known_args(argv)
    rng = random.Random(state["seed"] + int(time.time()))
    ngpus, check = int(args.g), int(args.c)
    time_label = "cputime" if args.C == "1" else "time"
    lo, hi, factor = parse_size(args.b), parse_size(args.e), int(args.f)
    json_path = _json_path(args.J)
    out: list[str] = []
    if json_path:
        out.append(f"# Writing JSON output to {json_path}")
    code = int(state["nccl_version_code"])
    out += [f"# nccl-tests version {state['tests_version']} nccl-headers={code} nccl-library={code}",
            "# Collective test starting: all_reduce_perf",
            f"# nThread 1 nGpus {ngpus} minBytes {lo} maxBytes {hi} step: {factor}(factor) warmup iters: "
            f"{args.w} iters: {args.n} agg iters: 1 validation: {check} graph: 0 unalign: 0", "#",
            "# Using devices"]
    devices = []
    for i in range(ngpus):
        pci = f"0000:{0x18 + i * 0x10:02x}:00"
        out.append("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s"
                   % (i, 0, os.getpid(), state["hostname"], i, pci, state["gpu_model"]))
        devices.append({"rank": i, "group": 0, "pid": os.getpid(), "hostname": state["hostname"], "device": i,
                        "device_hex": pci, "device_info": state["gpu_model"]})
    out.append("#")
    out.append("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
               % ("", "", "", "", ""))
    columns = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s"
    half, units = (time_label, "algbw", "busbw", "#wrong"), ("(us)", "(GB/s)", "(GB/s)", "")
    out.append(columns % ("size", "count", "type", "redop", "root", *half, *half, 0, ""))
    out.append(columns % ("(B)", "(elements)", "", "", "", *units, *units, 0, ""))
    results, bus_sum, errors = [], 0.0, 0
    size = lo
    while size <= hi:
        count = size // 4
        line = "%12li  %12li  %8s  %6s  %6s" % (count * 4, count, args.d, args.o, "%6i" % -1)
        halves = {}
        for key in ("out_of_place", "in_place"):
            t = nccl_time_us(count * 4, ngpus, state, rng)
            alg = count * 4 / 1e9 / (t * 1e-6)
            bus = alg * (2 * (ngpus - 1) / ngpus if ngpus > 1 else 1.0)
            wrong = float(count) if state["wrong"] and size >= 1024 else 0.0
            errors += 1 if wrong else 0
            if check:
                line += "  %7s  %6s  %6s  %6g" % (float_str(t, 7), float_str(alg, 6), float_str(bus, 6),
                                                   wrong)
            else:
                line += "  %7s  %6s  %6s    N/A" % (float_str(t, 7), float_str(alg, 6), float_str(bus, 6))
            halves[key] = {("cpu_time" if time_label == "cputime" else "time"): t, "alg_bw": alg,
                           "bus_bw": bus, "nwrong": wrong if check else None}
            if key == "out_of_place":
                bus_sum += bus
        out.append(line)
        results.append({"size": count * 4, "count": count, "type": args.d, "redop": args.o,
                        "root": "%6i" % -1,
                        **halves, "actual_iterations": int(args.n), "experiment_name": ""})
        if state["fail"]:
            out.append(f"{state['hostname']}: Test NCCL failure all_reduce.cu:44 'unhandled cuda error / '")
            out.append(f" .. {state['hostname']} pid {os.getpid()}: Test failure common.cu:377")
            print("\n".join(out), flush=True)
            return 1
        size = size * factor if factor > 1 else size + max(hi - lo, 1)
    avg = bus_sum / max(len(results), 1)
    out += ["# %-20s : %d %s" % ("Out of bounds values", errors, "FAILED" if errors else "OK"),
            "# %-20s : %g %s" % ("Avg bus bandwidth", avg, ""), "#",
            "# Collective test concluded: all_reduce_perf", "#", ""]
    print("\n".join(out), flush=True)
    if json_path:
        doc = {"version": 3, "start_time": time.strftime("%Y-%m-%d %H:%M:%S"),
               "args": ["all_reduce_perf", *argv],
               "env": [f"{k}={v}" for k, v in sorted(os.environ.items())], "nccl_version": code,
               "config": {"nthreads": 1, "ngpus": ngpus, "minimum_bytes": lo, "maximum_bytes": hi,
                          "step_factor": factor, "validation": check, "devices": devices},
               "results": results,
               "out_of_bounds": {"count": errors, "okay": "true" if not errors else "false"},
               "average_bus_bandwidth": {"bandwidth": avg, "okay": "unchecked"}, "errors": [],
               "end_time": time.strftime("%Y-%m-%d %H:%M:%S")}
        Path(json_path).write_text(json.dumps(doc))
    return 0


def _json_path(requested: str) -> str:
    """jsonOutputInit(): an existing file is never overwritten; `<path>.0`, `.1`, ... instead."""
    if not requested or not requested.lower().endswith(".json"):
        return ""
    path, n = requested, 0
    while os.path.exists(path):
        path = f"{requested}.{n}"
        n += 1
    return path


# -- perftest --------------------------------------------------------------------------------

def perftest(tool: str, argv: list[str], state: dict[str, Any]) -> int:
    p = argparse.ArgumentParser(prog=tool, add_help=False)
    p.add_argument("-d", default="mlx5_0")
    p.add_argument("-s", default="2" if tool.endswith("_lat") else "65536")
    p.add_argument("-n", default="1000" if tool.endswith("_lat") else "5000")
    p.add_argument("-p", default="18515")
    p.add_argument("--report_gbits", action="store_true")
    p.add_argument("--out_json", action="store_true")
    p.add_argument("--out_json_file", default="perftest_out.json")
    p.add_argument("host", nargs="?")
    args, _ = p.parse_known_args(argv)
    if "--help" in argv or "-h" in argv:
        print(f"Usage:\n  {tool}            start a server and wait for connection\n"
              f"  {tool} <host>     connect to server at <host>\n\nOptions:\n"
              "  -d, --ib-dev=<dev>  Use IB device <dev>\n      --out_json  Save the report in a json file\n"
              "      --out_json_file=<file>  Name of the report json file")
        return 0
    port = int(args.p)
    if args.host is None:  # server: accept one client, then report
        print("\n************************************\n* Waiting for client to connect... *\n"
              "************************************", flush=True)
        with socket.create_server(("127.0.0.1", port), reuse_port=False) as srv:
            srv.settimeout(60)
            conn, _ = srv.accept()
            conn.recv(16)
            conn.close()
    else:
        try:
            with socket.create_connection((args.host, port), timeout=5) as conn:
                conn.sendall(b"hello")
        except OSError:
            print(f"Couldn't connect to {args.host}:{port}\nUnable to open file descriptor for socket "
                  "connection Unable to init the socket connection", file=sys.stderr)
            return 1
    rng = random.Random(state["seed"] + int(time.time()))
    size, iters = int(args.s), int(args.n)
    header = _perftest_header(tool, args.d, state)
    if state["cpu_freq_warning"]:
        print("Conflicting CPU frequency values detected: 2200.000000 != 1040.353000. CPU Frequency is not "
              "max.", file=sys.stderr, flush=True)
    if tool.endswith("_lat"):
        base = (1.45 + size / 12e3) * state["small_latency_factor"]
        values = sorted(base * rng.uniform(0.98, 1.0) * (1 + 0.3 * rng.random() ** 8) for _ in range(200))
        t = {"t_min": values[0], "t_max": values[-1], "t_typical": values[100], "t_avg": sum(values) / 200,
             "t_stdev": 0.02, "p99": values[198], "p99_9": values[199]}
        print(header + "\n #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
              "t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ")
        print(" %-7lu %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f "
              "\t\t%-7.2f" % (size, iters, *t.values()))
        results = {"MsgSize": size, "n_iterations": iters, **{k: round(v, 2) for k, v in (
            ("t_min", t["t_min"]), ("t_max", t["t_max"]), ("t_typical", t["t_typical"]),
            ("t_avg", t["t_avg"]),
            ("t_stdev", t["t_stdev"]), ("percentile_99", t["p99"]), ("percentile_99.9", t["p99_9"]))}}
    else:
        mib = 46000.0 * state["rdma_bw_factor"] * rng.uniform(0.995, 1.0)
        value = mib * (1 << 20) * 8 / 1e9 if args.report_gbits else mib
        rate = mib * (1 << 20) / size / 1e6
        unit = "Gb/sec" if args.report_gbits else "MiB/sec"
        print(header + f"\n #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]")
        print(" %-7lu    %-10d       %-7.2f            %-7.2f\t\t     %-7.6f"
              % (size, iters, value * 1.001, value, rate))
        results = {"MsgSize": size, "n_iterations": iters, "BW_peak": round(value * 1.001, 2),
                   "BW_average": round(value, 2), "MsgRate": round(rate, 6)}
    print(RESULT_LINE, flush=True)
    if args.out_json and args.host is not None:
        test = "RDMA_Write_Latency_Test" if tool.endswith("_lat") else "RDMA_Write_BW_Test"
        Path(args.out_json_file).write_text(_perftest_json(test, args.d, state, results))
    return 0


def _perftest_header(tool: str, device: str, state: dict[str, Any]) -> str:
    title = "RDMA_Write Latency Test" if tool.endswith("_lat") else "RDMA_Write BW Test"
    return "\n".join([
        RESULT_LINE, "                    " + title,
        f" Dual-port       : OFF\t\tDevice         : {device}",
        " Number of qps   : 1\t\tTransport type : IB",
        " Connection type : RC\t\tUsing SRQ      : OFF",
        " PCIe relax order: ON", " ibv_wr* API     : ON", " TX depth        : 128",
        " Mtu             : 4096[B]",
        f" Link type       : {state['link_type']}", " Max inline data : 0[B]", " rdma_cm QPs\t : OFF",
        " Data ex. method : Ethernet", RESULT_LINE,
        " local address: LID 0x11 QPN 0x0123 PSN 0x3c9e82 RKey 0x080359 VAddr 0x007f9fc479c000",
        " remote address: LID 0x12 QPN 0x0124 PSN 0xbd024b RKey 0x080258 VAddr 0x007fe62504b000",
        RESULT_LINE])


def _perftest_json(test: str, device: str, state: dict[str, Any], results: dict[str, Any]) -> str:
    if not state["json_legacy"]:
        return json.dumps({"test_info": {"test": test, "Dual_port": "OFF", "Device": device,
                                         "Link_type": state["link_type"]}, "results": results}, indent=0)
    # Before f9e82f7: unquoted keys and values, trailing commas (linux-rdma/perftest issue #216).
    lines = ["{", "test_info: {", f"test: {test},", "Dual_port: OFF,", f'Device: "{device}",',
             f"Link_type: {state['link_type']},", "},", "results: {"]
    lines += [f"{k}: {v:.2f}," if isinstance(v, float) else f"{k}: {v}," for k, v in results.items()]
    return "\n".join(lines + ["},", "}", ""])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print("usage: probe_fake all_reduce_perf|ib_write_lat|ib_write_bw [args]", file=sys.stderr)
        return 2
    tool, rest = os.path.basename(argv[0]), argv[1:]
    state = load_state()
    count_run(tool)
    if state["hang"]:
        hang(str(state.get("hang_marker", "probe-fake-child")))
    if tool.startswith("all_reduce_perf"):
        return all_reduce_perf(rest, state)
    if tool in ("ib_write_lat", "ib_write_bw"):
        return perftest(tool, rest, state)
    print(f"probe_fake: unknown tool {tool}", file=sys.stderr)
    return 2


def write_shims(bin_dir: Path, state_file: Path) -> dict[str, Path]:
    """Executables named like the real tools that run this module with the demo's state file."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    package_root = Path(__file__).resolve().parents[2]
    out = {}
    for tool in ("all_reduce_perf", "ib_write_lat", "ib_write_bw"):
        path = bin_dir / tool
        path.write_text(f"#!/bin/sh\nexport {STATE_ENV}='{state_file}'\n"
                        f"export PYTHONPATH='{package_root}'${{PYTHONPATH:+:$PYTHONPATH}}\n"
                        f"exec '{sys.executable}' -m infrapulse.simulate.probe_fake {tool} \"$@\"\n")
        path.chmod(0o755)
        out[tool] = path
    return out


if __name__ == "__main__":
    sys.exit(main())
