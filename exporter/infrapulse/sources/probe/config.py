"""Config schema of `sources.probe` (off by default)."""

from __future__ import annotations

from typing import Any

from ...schema import Bool, Duration, Float, Int, ListOf, MapOf, SchemaError, Section, Str

METRICS = ("latency", "latency_p99", "latency_p99_9", "busbw", "bandwidth")

NCCL_RUN = Section(doc="One nccl-tests run.", fields={
    "name": Str("Probe name (the `probe` label).", required=True, pattern=r"[a-z][a-z0-9_]{0,40}"),
    "args": ListOf("Arguments after the binary; `{gpus}` is replaced by the number of GPUs.", item=Str(),
                   default=[]),
})
DEFAULT_NCCL_RUNS = [
    {"name": "nccl_latency", "args": ["-b", "8", "-e", "32K", "-f", "2", "-g", "{gpus}", "-n", "100", "-w",
                                      "10"]},
    {"name": "nccl_bandwidth", "args": ["-b", "64M", "-e", "1G", "-f", "2", "-g", "{gpus}"]},
]

FLOOR = Section(doc="An absolute floor: a run worse than it is `below_floor` whatever its history.", fields={
    "metric": Str("Tracked metric.", required=True, choices=METRICS),
    "test": Str("Test (all_reduce, ib_write_lat, ...); empty: any.", default=""),
    "size": Int("Message size in bytes; 0: any.", default=0, min=0),
    "model": Str("Glob on the GPU model (nccl-tests) or the NIC's hca_type (perftest); empty: any.",
                 default=""),
    "min": Float("Lowest acceptable value (bandwidths, bytes per second)."),
    "max": Float("Highest acceptable value (latencies, seconds)."),
})


def _check(section: dict[str, Any], path: str) -> None:
    names = [r["name"] for r in section["nccl"]["runs"]]
    if len(names) != len(set(names)):
        raise SchemaError(f"{path}.nccl.runs", f"probe names must be unique, got {names}")
    for i, floor in enumerate(section["baseline"]["floors"]):
        if floor["min"] is None and floor["max"] is None:
            raise SchemaError(f"{path}.baseline.floors[{i}]", "set min (bandwidths) or max (latencies)")
    for i, pair in enumerate(section["perftest"]["pairs"]):
        client, sep, server = pair.partition(":")
        if not sep or not client or not server or client == server:
            raise SchemaError(f"{path}.perftest.pairs[{i}]",
                              f"expected \"client_dev:server_dev\", got {pair!r}")
    if section["baseline"]["min_runs"] > section["baseline"]["runs"]:
        raise SchemaError(f"{path}.baseline.min_runs", "must be <= baseline.runs")


CONFIG = Section(
    doc="Active probes (off by default): nccl-tests and perftest runs on an idle node, result files "
        "dropped by jobs, baselines and verdicts kept under the daemon's state_dir. See docs/probes.md.",
    check=_check,
    fields={
        "enabled": Bool("Run the probe source.", default=False),
        "interval": Duration("Time between scheduled runs (plus a random jitter).", default="6h", min=1),
        "jitter": Duration("Random delay added to each scheduled run, so a fleet does not probe at once.",
                           default="30m", min=0),
        "check_interval": Duration("How often versions, idleness and the inbox are checked.", default="30s",
                                   min=0.1),
        "change_delay": Duration("After a version change (or the first start), run this soon.", default="2m",
                                 min=0),
        "timeout": Duration("Hard limit of one probe; its whole process group is killed after it.",
                            default="10m", min=1),
        "max_age": Duration("The last good run's age is alerted on past this (exported as "
                            "infrapulse_probe_max_age_seconds).", default="2d", min=60),
        "nice": Int("Added to the probes' nice value (lower CPU priority).", default=10, min=0, max=19),
        "io_idle": Bool("Run the probes in the idle I/O class.", default=True),
        "env": MapOf("Extra environment of the probes (NCCL_*, UCX_*).", value=Str(), default={}),
        "idle": Section(doc="When the node counts as idle.", fields={
            "gpu_processes": Bool("Require no GPU compute processes (NVML).", default=True),
            "serving": Bool("Require no running or waiting requests on this node's serving endpoints "
                            "(what the serving source publishes).", default=True),
            "maintenance_file": Str("While this file exists the node counts as idle, whatever the rest "
                                    "says (an operator's maintenance window).", default=""),
        }),
        "baseline": Section(doc="Baselines and verdicts.", fields={
            "runs": Int("The baseline is the median of the last this many good runs.", default=5, min=1),
            "min_runs": Int("Runs needed before a verdict other than no_baseline.", default=3, min=1),
            "latency_threshold": Float("A latency slower than the baseline by more than this fraction is "
                                       "a regression.", default=0.25, min=0.01),
            "bandwidth_threshold": Float("A bandwidth lower than the baseline by more than this fraction "
                                         "is a regression.", default=0.15, min=0.01, max=0.99),
            "floors": ListOf("Absolute floors per GPU/NIC model.", item=FLOOR, default=[]),
        }),
        "nccl": Section(doc="nccl-tests on this node (NVLink/P2P/SHM: path=intra_node).", fields={
            "enabled": Bool("Run nccl-tests.", default=True),
            "binary": Str("all_reduce_perf (or another *_perf), absolute or looked up in PATH.",
                          default="all_reduce_perf"),
            "runs": ListOf("The runs, each a probe of its own.", item=NCCL_RUN, default=DEFAULT_NCCL_RUNS),
            "gpus": Int("GPUs to use ({gpus}); 0: as many as the nvml/dcgm source sees (at least 1).",
                        default=0, min=0),
            "json": Bool("Also write -J JSON (nccl-tests 2.17.4+) and read it back; its shape is not "
                         "confirmed by a real capture yet.", default=False),
            "latency_max_bytes": Int("Sizes up to this are tracked as latency.", default=32768, min=1),
            "bandwidth_min_bytes": Int("Sizes from this on are tracked as bus bandwidth.", default=1 << 20,
                                       min=1),
        }),
        "perftest": Section(doc="perftest between two RDMA NICs of this node (path=fabric).", fields={
            "enabled": Bool("Run perftest.", default=True),
            "latency_binary": Str("Latency test binary.", default="ib_write_lat"),
            "bandwidth_binary": Str("Bandwidth test binary; empty: no bandwidth probe.",
                                    default="ib_write_bw"),
            "pairs": ListOf("\"client_dev:server_dev\" pairs; empty: consecutive RDMA devices in sysfs "
                            "(mlx5_0:mlx5_1, mlx5_2:mlx5_3, ...).", item=Str(), default=[]),
            "max_pairs": Int("At most this many automatic pairs.", default=8, min=1),
            "latency_sizes": ListOf("Message sizes of the latency probe.", item=Int(min=1), default=[8,
                                                                                                     4096]),
            "bandwidth_sizes": ListOf("Message sizes of the bandwidth probe.", item=Int(min=1),
                                      default=[1 << 20]),
            "latency_iterations": Int("-n of the latency probe.", default=10000, min=10),
            "bandwidth_iterations": Int("-n of the bandwidth probe.", default=5000, min=10),
            "base_port": Int("TCP port of the first pair's exchange (the next pairs use the next ports).",
                             default=18515, min=1, max=65000),
            "server_host": Str("Address the client reaches the server's exchange port on.",
                               default="127.0.0.1"),
            "json": Str("--out_json: auto (when --help mentions it), true or false.", default="auto",
                        choices=("auto", "true", "false")),
            "report_gbits": Bool("Pass --report_gbits.", default=False),
            "extra_args": ListOf("Arguments for both sides, e.g. [-x, \"3\"] (GID index on RoCE).",
                                 item=Str(), default=[]),
        }),
        "inbox": Section(doc="Result files written by jobs (see deploy/kubernetes/probe-job.yaml).", fields={
            "dir": Str("Directory watched for result files; empty: none.", default=""),
            "settle": Duration("A file is read once it has not changed for this long.", default="10s", min=0),
            "max_file_bytes": Int("Larger files are refused (too_large).", default=16 << 20, min=1024),
        }),
        "versions": Section(doc="What a run ran under; a change triggers a run.", fields={
            "sysfs_root": Str("Where sysfs is mounted (RDMA firmware, driver module versions).",
                              default="/sys"),
            "nccl_library": Str("Path of libnccl.so.2; the version is read from the file it resolves to.",
                                default=""),
            "files": MapOf("Name -> glob of files whose content hash is a version (e.g. the RoCE "
                           "congestion-control settings).", value=Str(), default={}),
        }),
    },
)
