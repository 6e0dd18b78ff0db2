"""The `infrapulse_probe_*` families of the probe source (the latency mesh declares its own).

Labels: `scope` names what a result measured ("local" for this node's own runs, a NIC pair
such as "mlx5_0->mlx5_1", or the scope a dropped result file declares); `path` says what it
crossed: `intra_node` (nccl-tests on one node: NVLink/P2P/SHM, never the NIC or the switches)
or `fabric` (NIC to NIC through the switches, multi-node results). `size` is the message size
in bytes. `metric` names a tracked value: latency, latency_p99, latency_p99_9 (seconds, lower
is better), busbw, bandwidth (bytes per second, higher is better).
"""

from __future__ import annotations

from ... import catalog

SOURCE = "probe"
NCCL = ("scope", "path", "collective", "dtype", "redop", "size", "placement")
RDMA = ("scope", "path", "test", "device", "size")
TRACKED = ("scope", "path", "test", "metric", "size")


def _gauge(name: str, help_: str, labels: tuple[str, ...], unit: str = "") -> catalog.Family:
    return catalog.declare(name, catalog.GAUGE, help_, labels, unit=unit, source=SOURCE)


NCCL_BUSBW = _gauge(
    "infrapulse_probe_nccl_bus_bandwidth_bytes_per_second",
    "nccl-tests bus bandwidth (busbw) of the last run, per collective, size and placement "
    "(out_of_place, in_place). Compare per size: the table's average depends on the sizes swept.",
    NCCL, "bytes")
NCCL_ALGBW = _gauge(
    "infrapulse_probe_nccl_algorithm_bandwidth_bytes_per_second",
    "nccl-tests algorithm bandwidth (algbw: size / time) of the last run.", NCCL, "bytes")
NCCL_TIME = _gauge(
    "infrapulse_probe_nccl_time_seconds",
    "nccl-tests time per operation of the last run (GPU time, or CPU time when run with -C 1).",
    NCCL, "seconds")
NCCL_WRONG = _gauge(
    "infrapulse_probe_nccl_wrong_elements",
    "Elements with wrong results in the last run (#wrong); absent when the run did not check (-c 0, "
    "alltoall in-place). Any value above 0 means corrupted data.", NCCL)
RDMA_LATENCY = _gauge(
    "infrapulse_probe_rdma_latency_seconds",
    "perftest latency of the last run per RDMA device (the client's) and size; statistic: min, max, "
    "typical (median), average, stdev, p99, p99_9.", RDMA + ("statistic",), "seconds")
RDMA_BANDWIDTH = _gauge(
    "infrapulse_probe_rdma_bandwidth_bytes_per_second",
    "perftest bandwidth of the last run per RDMA device and size; statistic: peak, average.",
    RDMA + ("statistic",), "bytes")
RDMA_MSG_RATE = _gauge(
    "infrapulse_probe_rdma_message_rate_per_second",
    "perftest message rate of the last run per RDMA device and size.", RDMA)
BASELINE_RATIO = _gauge(
    "infrapulse_probe_baseline_ratio",
    "Last measured value / baseline (the median of the last good runs) of a tracked metric. Above 1 "
    "is slower for latencies, below 1 is slower for bandwidths.", TRACKED)
BASELINE_VALUE = _gauge(
    "infrapulse_probe_baseline_value",
    "The baseline of a tracked metric, in its base unit (seconds for latency*, bytes per second for "
    "busbw and bandwidth).", TRACKED)
MEASURED_VALUE = _gauge(
    "infrapulse_probe_measured_value",
    "The last measured value of a tracked metric, in its base unit.", TRACKED)
VERDICT = _gauge(
    "infrapulse_probe_verdict",
    "1 for the current verdict of a tracked metric: ok, regression (worse than the baseline by more "
    "than the configured threshold), below_floor (worse than the configured absolute floor), "
    "no_baseline (fewer good runs than baseline.min_runs).", TRACKED + ("verdict",))
CHANGE_RATIO = _gauge(
    "infrapulse_probe_change_ratio",
    "Before -> after of the last version change: the first run after the change divided by the baseline "
    "from before it, per tracked metric and changed component (nic_firmware, gpu_driver, nccl, ...).",
    TRACKED + ("component", "before", "after"))
CHANGE_TIME = _gauge(
    "infrapulse_probe_version_change_timestamp_seconds",
    "Unix time the last change of each component's version was seen (dashboard annotations).",
    ("component", "before", "after"), "seconds")
VERSIONS = catalog.declare(
    "infrapulse_probe_versions_info", catalog.INFO,
    "The versions probes run under now: nic_firmware, nic_driver, gpu_driver, kernel, nccl and the "
    "configured version files (hashes).", ("component", "version"), source=SOURCE)
LAST_RUN = _gauge(
    "infrapulse_probe_last_run_timestamp_seconds",
    "Unix time a probe last ran (whatever its result).", ("probe",), "seconds")
LAST_GOOD = _gauge(
    "infrapulse_probe_last_good_run_timestamp_seconds",
    "Unix time of a probe's last good run; absent while it never had one.", ("probe",), "seconds")
GOOD_AGE = _gauge(
    "infrapulse_probe_last_good_run_age_seconds",
    "Seconds since a probe's last good run, or since it was first configured when it never had one: "
    "a busy node that is never idle makes this grow.", ("probe",), "seconds")
MAX_AGE = _gauge(
    "infrapulse_probe_max_age_seconds",
    "The configured limit (sources.probe.max_age) the last good run's age is alerted on.", (), "seconds")
DURATION = _gauge(
    "infrapulse_probe_run_duration_seconds", "Wall time of a probe's last run.", ("probe",), "seconds")
LAST_RESULT = _gauge(
    "infrapulse_probe_last_result",
    "1 for the result of a probe's last attempt: ok, busy (skipped: GPU processes, serving requests), "
    "no_binary, timeout, failed, wrong_results; perftest against a peer (probe `<test>@<peer>`) also "
    "peer_refused, peer_busy, peer_unreachable.", ("probe", "result"))
RUNS = catalog.declare(
    "infrapulse_probe_runs_total", catalog.COUNTER,
    "Probe attempts by result (a busy node counts one skip per scheduled run, not per check).",
    ("probe", "result"), source=SOURCE)
INGESTED = catalog.declare(
    "infrapulse_probe_ingested_files_total", catalog.COUNTER,
    "Result files from the inbox directory by outcome: ok, failed, wrong_results, unparsable, "
    "unreadable, too_large, no_scope.", ("result",), source=SOURCE)

RESULTS = ("ok", "busy", "no_binary", "timeout", "failed", "wrong_results", "peer_refused", "peer_busy",
           "peer_unreachable")
VERDICTS = ("ok", "regression", "below_floor", "no_baseline")
