"""Config schema of `sources.probe` (off by default): `ProbeSettings` and the settings classes of
its sections."""

from __future__ import annotations

from dataclasses import dataclass

from ...schema import Bool, Duration, Float, Int, ListOf, MapOf, SchemaError, Settings, Str, setting, settings
from ..base import SourceSettings

DEVICE_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
METRICS = ("latency", "latency_p99", "latency_p99_9", "busbw", "bandwidth")


@settings("One nccl-tests run.")
@dataclass(kw_only=True, slots=True)
class NcclRunSettings(Settings):
    name: str = setting(Str("Probe name (the `probe` label).", required=True,
                            pattern=r"[a-z][a-z0-9_]{0,40}"))
    args: list[str] = setting(ListOf(
        "Arguments after the binary; `{gpus}` is replaced by the number of GPUs.", item=Str(), default=[]))


NCCL_RUN = NcclRunSettings.SCHEMA
DEFAULT_NCCL_RUNS = [
    {"name": "nccl_latency", "args": ["-b", "8", "-e", "32K", "-f", "2", "-g", "{gpus}", "-n", "100", "-w",
                                      "10"]},
    {"name": "nccl_bandwidth", "args": ["-b", "64M", "-e", "1G", "-f", "2", "-g", "{gpus}"]},
]


@settings("An absolute floor: a run worse than it is `below_floor` whatever its history.")
@dataclass(kw_only=True, slots=True)
class FloorSettings(Settings):
    metric: str = setting(Str("Tracked metric.", required=True, choices=METRICS))
    test: str = setting(Str("Test (all_reduce, ib_write_lat, ...); empty: any.", default=""))
    size: int = setting(Int("Message size in bytes; 0: any.", default=0, min=0))
    model: str = setting(Str(
        "Glob on the GPU model (nccl-tests) or the NIC's hca_type (perftest); empty: any.", default=""))
    min: float | None = setting(Float("Lowest acceptable value (bandwidths, bytes per second)."))
    max: float | None = setting(Float("Highest acceptable value (latencies, seconds)."))


FLOOR = FloorSettings.SCHEMA


@settings("A peer node whose daemon starts the perftest server side on request "
          "(its sources.probe.perftest.peer_server).")
@dataclass(kw_only=True, slots=True)
class PeerSettings(Settings):
    name: str = setting(Str("Peer name: the scope is `peer:<name>`.", required=True,
                            pattern=r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}"))
    url: str = setting(Str("Base URL of the peer's daemon, e.g. https://gpu-node-02:9477.", required=True,
                           pattern=r"https?://[^\s/?#]+/?"))
    device: str = setting(Str("The peer's RDMA device that runs the server.", required=True,
                              pattern=DEVICE_PATTERN))
    local_device: str = setting(Str("This node's RDMA device that runs the client; empty: the first one in "
                                    "sysfs.", default="", pattern=r"|" + DEVICE_PATTERN))
    address: str = setting(Str("Address the client reaches the peer's server on; empty: the one the peer "
                               "answers (its device's netdev address).", default=""))
    token_file: str = setting(Str("File holding the shared token (sent as X-Infrapulse-Probe-Token).",
                                  default=""))
    user: str = setting(Str("Basic auth user of the peer's web config.", default=""))
    password_file: str = setting(Str("File holding that user's password.", default=""))
    ca_file: str = setting(Str("CA bundle the peer's TLS certificate must chain to; empty: the system's.",
                               default=""))
    insecure_http: bool = setting(Bool(
        "Allow a plain http:// URL (the token or password travel in the clear).", default=False))
    request_timeout: float = setting(Duration("Limit of the request to the peer (connect, answer).",
                                              default="15s", min=0.1))
    retry_for: float = setting(Duration(
        "A busy peer (409, 429) is asked again for this long before the run is peer_busy.", default="20s",
        min=0))


PEER = PeerSettings.SCHEMA


@settings("The server side for peers (off by default): POST /api/v1/probes/perftest-server "
          "starts one perftest server on an authenticated request. See docs/probes.md.")
@dataclass(kw_only=True, slots=True)
class PeerServerSettings(Settings):
    enabled: bool = setting(Bool("Serve the endpoint (refused unless token_file or web config basic auth is "
                                 "set).", default=False))
    token_file: str = setting(Str("File holding the shared token peers must send (X-Infrapulse-Probe-Token); "
                                  "empty: basic auth of the web config only.", default=""))
    allowed_users: list[str] = setting(ListOf("Web config basic auth users allowed to call it; empty: any.",
                                              item=Str(), default=[]))
    devices: list[str] = setting(ListOf("RDMA devices a peer may ask for; empty: any RDMA device in sysfs.",
                                        item=Str(pattern=DEVICE_PATTERN), default=[]))
    port_min: int = setting(Int("Lowest TCP port of the server's exchange.", default=18600, min=1024,
                                max=65535))
    port_max: int = setting(Int("Highest TCP port of the server's exchange.", default=18631, min=1024,
                                max=65535))
    address: str = setting(Str("Address answered to the client; empty: the IPv4 address of the device's "
                               "netdev.", default=""))
    timeout: float = setting(Duration("The server is killed after this, whether or not a client came.",
                                      default="60s", min=0.1))
    min_interval: float = setting(Duration("At least this long between two started servers.", default="5s",
                                           min=0))
    max_size: int = setting(Int("Largest message size a peer may ask for.", default=1 << 26, min=1))
    max_iterations: int = setting(Int("Most iterations a peer may ask for.", default=100000, min=10))


PEER_SERVER = PeerServerSettings.SCHEMA


@settings("When the node counts as idle.")
@dataclass(kw_only=True, slots=True)
class IdleSettings(Settings):
    gpu_processes: bool = setting(Bool("Require no GPU compute processes (NVML).", default=True))
    serving: bool = setting(Bool("Require no running or waiting requests on this node's serving endpoints "
                                 "(what the serving source publishes).", default=True))
    maintenance_file: str = setting(Str("While this file exists the node counts as idle, whatever the rest "
                                        "says (an operator's maintenance window).", default=""))


@settings("Baselines and verdicts.")
@dataclass(kw_only=True, slots=True)
class BaselineSettings(Settings):
    runs: int = setting(Int("The baseline is the median of the last this many good runs.", default=5, min=1))
    min_runs: int = setting(Int("Runs needed before a verdict other than no_baseline.", default=3, min=1))
    latency_threshold: float = setting(Float("A latency slower than the baseline by more than this fraction "
                                             "is a regression.", default=0.25, min=0.01))
    bandwidth_threshold: float = setting(Float("A bandwidth lower than the baseline by more than this "
                                               "fraction is a regression.", default=0.15, min=0.01, max=0.99))
    floors: list[FloorSettings] = setting(ListOf("Absolute floors per GPU/NIC model.", item=FLOOR,
                                                 default=[]))


@settings("nccl-tests on this node (NVLink/P2P/SHM: path=intra_node).")
@dataclass(kw_only=True, slots=True)
class NcclSettings(Settings):
    enabled: bool = setting(Bool("Run nccl-tests.", default=True))
    binary: str = setting(Str("all_reduce_perf (or another *_perf), absolute or looked up in PATH.",
                              default="all_reduce_perf"))
    runs: list[NcclRunSettings] = setting(ListOf("The runs, each a probe of its own.", item=NCCL_RUN,
                                                  default=DEFAULT_NCCL_RUNS))
    gpus: int = setting(Int("GPUs to use ({gpus}); 0: as many as the nvml/dcgm source sees (at least 1).",
                            default=0, min=0))
    json: bool = setting(Bool("Also write -J JSON (nccl-tests 2.17.4+) and read it back; its shape is not "
                              "confirmed by a real capture yet.", default=False))
    latency_max_bytes: int = setting(Int("Sizes up to this are tracked as latency.", default=32768, min=1))
    bandwidth_min_bytes: int = setting(Int("Sizes from this on are tracked as bus bandwidth.",
                                           default=1 << 20, min=1))


@settings("perftest between two RDMA NICs of this node, and against peers (path=fabric).")
@dataclass(kw_only=True, slots=True)
class PerftestSettings(Settings):
    enabled: bool = setting(Bool("Run perftest.", default=True))
    latency_binary: str = setting(Str("Latency test binary.", default="ib_write_lat"))
    bandwidth_binary: str = setting(Str("Bandwidth test binary; empty: no bandwidth probe.",
                                        default="ib_write_bw"))
    pairs: list[str] = setting(ListOf("\"client_dev:server_dev\" pairs; empty: consecutive RDMA devices in "
                                      "sysfs (mlx5_0:mlx5_1, mlx5_2:mlx5_3, ...).", item=Str(), default=[]))
    max_pairs: int = setting(Int("At most this many automatic pairs.", default=8, min=1))
    latency_sizes: list[int] = setting(ListOf("Message sizes of the latency probe.", item=Int(min=1),
                                              default=[8, 4096]))
    bandwidth_sizes: list[int] = setting(ListOf("Message sizes of the bandwidth probe.", item=Int(min=1),
                                                default=[1 << 20]))
    latency_iterations: int = setting(Int("-n of the latency probe.", default=10000, min=10))
    bandwidth_iterations: int = setting(Int("-n of the bandwidth probe.", default=5000, min=10))
    base_port: int = setting(Int("TCP port of the first pair's exchange (the next pairs use the next ports).",
                                 default=18515, min=1, max=65000))
    server_host: str = setting(Str("Address the client reaches the server's exchange port on.",
                                   default="127.0.0.1"))
    json: str = setting(Str("--out_json: auto (when --help mentions it), true or false.", default="auto",
                            choices=("auto", "true", "false")))
    report_gbits: bool = setting(Bool("Pass --report_gbits.", default=False))
    extra_args: list[str] = setting(ListOf("Arguments for both sides, e.g. [-x, \"3\"] (GID index on RoCE).",
                                           item=Str(), default=[]))
    peers: list[PeerSettings] = setting(ListOf("Peer nodes to run perftest against (scope peer:<name>), "
                                               "besides the local pairs.", item=PEER, default=[]))
    peer_server: PeerServerSettings = setting(PEER_SERVER)


@settings("Result files written by jobs (see deploy/kubernetes/probe-job.yaml).")
@dataclass(kw_only=True, slots=True)
class InboxSettings(Settings):
    dir: str = setting(Str("Directory watched for result files; empty: none.", default=""))
    settle: float = setting(Duration("A file is read once it has not changed for this long.", default="10s",
                                     min=0))
    max_file_bytes: int = setting(Int("Larger files are refused (too_large).", default=16 << 20, min=1024))


@settings("What a run ran under; a change triggers a run.")
@dataclass(kw_only=True, slots=True)
class VersionsSettings(Settings):
    sysfs_root: str = setting(Str("Where sysfs is mounted (RDMA firmware, driver module versions).",
                                  default="/sys"))
    nccl_library: str = setting(Str("Path of libnccl.so.2; the version is read from the file it resolves to.",
                                    default=""))
    files: dict[str, str] = setting(MapOf("Name -> glob of files whose content hash is a version (e.g. the "
                                          "RoCE congestion-control settings).", value=Str(), default={}))


def _check_peers(section: ProbeSettings, path: str) -> None:
    perftest = section.perftest
    names = [p.name for p in perftest.peers]
    if len(names) != len(set(names)):
        raise SchemaError(f"{path}.perftest.peers", f"peer names must be unique, got {names}")
    for i, peer in enumerate(perftest.peers):
        where = f"{path}.perftest.peers[{i}]"
        if bool(peer.user) != bool(peer.password_file):
            raise SchemaError(where, "user and password_file go together")
        if not peer.token_file and not peer.user:
            raise SchemaError(where, "set token_file or user + password_file (the peer refuses anonymous "
                                     "requests)")
        if peer.url.startswith("http://") and not peer.insecure_http:
            raise SchemaError(f"{where}.url", "plain http sends the credentials in the clear: use https "
                                              "(or set insecure_http: true)")
    server = perftest.peer_server
    if server.port_min > server.port_max:
        raise SchemaError(f"{path}.perftest.peer_server.port_min", "must be <= port_max")


def _check(section: ProbeSettings, path: str) -> None:
    """Cross-field rules on the validated `sources.probe` section."""
    _check_peers(section, path)
    nccl, baseline, perftest = section.nccl, section.baseline, section.perftest
    names = [r.name for r in nccl.runs]
    if len(names) != len(set(names)):
        raise SchemaError(f"{path}.nccl.runs", f"probe names must be unique, got {names}")
    for i, floor in enumerate(baseline.floors):
        if floor.min is None and floor.max is None:
            raise SchemaError(f"{path}.baseline.floors[{i}]", "set min (bandwidths) or max (latencies)")
    for i, pair in enumerate(perftest.pairs):
        client, sep, server = pair.partition(":")
        if not sep or not client or not server or client == server:
            raise SchemaError(f"{path}.perftest.pairs[{i}]",
                              f"expected \"client_dev:server_dev\", got {pair!r}")
    if baseline.min_runs > baseline.runs:
        raise SchemaError(f"{path}.baseline.min_runs", "must be <= baseline.runs")


@settings("Active probes (off by default): nccl-tests and perftest runs on an idle node, result files "
          "dropped by jobs, baselines and verdicts kept under the daemon's state_dir. See docs/probes.md.",
          check=_check)
@dataclass(kw_only=True, slots=True)
class ProbeSettings(SourceSettings):
    enabled: bool = setting(Bool("Run the probe source.", default=False))
    interval: float = setting(Duration("Time between scheduled runs (plus a random jitter).", default="6h",
                                       min=1))
    jitter: float = setting(Duration("Random delay added to each scheduled run, so a fleet does not probe at "
                                     "once.", default="30m", min=0))
    check_interval: float = setting(Duration("How often versions, idleness and the inbox are checked.",
                                             default="30s", min=0.1))
    change_delay: float = setting(Duration("After a version change (or the first start), run this soon.",
                                           default="2m", min=0))
    timeout: float = setting(Duration("Hard limit of one probe; its whole process group is killed after it.",
                                      default="10m", min=1))
    max_age: float = setting(Duration("The last good run's age is alerted on past this (exported as "
                                      "infrapulse_probe_max_age_seconds).", default="2d", min=60))
    nice: int = setting(Int("Added to the probes' nice value (lower CPU priority).", default=10, min=0,
                            max=19))
    io_idle: bool = setting(Bool("Run the probes in the idle I/O class.", default=True))
    env: dict[str, str] = setting(MapOf("Extra environment of the probes (NCCL_*, UCX_*).", value=Str(),
                                        default={}))
    idle: IdleSettings = setting(IdleSettings.SCHEMA)
    baseline: BaselineSettings = setting(BaselineSettings.SCHEMA)
    nccl: NcclSettings = setting(NcclSettings.SCHEMA)
    perftest: PerftestSettings = setting(PerftestSettings.SCHEMA)
    inbox: InboxSettings = setting(InboxSettings.SCHEMA)
    versions: VersionsSettings = setting(VersionsSettings.SCHEMA)


CONFIG = ProbeSettings.SCHEMA
