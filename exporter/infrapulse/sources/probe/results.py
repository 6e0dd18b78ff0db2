"""What the nccl-tests and perftest parsers return: plain, immutable records in the tools' own
units (µs, GB/s, MiB/s or Gb/s as printed), plus the conversions to base units."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

GB = 1e9  # nccl-tests' GB/s: bytes / 1.0E9 / seconds (src/all_reduce.cu getBw)
MIB = float(1 << 20)  # perftest's MB/sec (MiB/sec since 2024): bytes / 0x100000 / seconds
GBIT = 1e9 / 8  # perftest --report_gbits: 10^9 bits per second


class ProbeParseError(ValueError):
    """The text is not a result of the tool. `reason` is a short code for the source status."""

    def __init__(self, message: str, reason: str = "unparsable") -> None:
        super().__init__(message)
        self.reason = reason


# -- nccl-tests ------------------------------------------------------------------------------

class NcclMeasurement(NamedTuple):
    """One half of a table row: the out-of-place or the in-place measurement (a tuple: a
    200-row table makes 400 of them, and tuples are built ten times faster than dataclasses)."""

    time_us: float  # `time` (GPU time) or `cputime` with -C 1, see NcclResult.time_kind
    algbw_gbps: float
    busbw_gbps: float
    wrong: float | None = None  # `#wrong`: wrong elements; None when N/A (-c 0, alltoall in-place)
    max_error: float | None = None  # the pre-2022 `error` column: the largest deviation, not a count
    per_iter: tuple[float, ...] = ()  # -I 1: i_min, i_max, i_p99 (µs), i_cv%

    @property
    def wrong_results(self) -> bool:
        return self.wrong is not None and self.wrong > 0


class NcclRow(NamedTuple):
    size: int  # bytes
    elements: int  # `count`: elements per rank
    dtype: str
    redop: str  # "none" for alltoall; "" when the version printed no redop column (broadcast)
    root: int | None  # None when the version printed no root column
    out_of_place: NcclMeasurement | None
    in_place: NcclMeasurement | None


@dataclass
class NcclResult:
    collective: str = ""  # "all_reduce" (from the program name: all_reduce_perf[_mpi])
    rows: list[NcclRow] = field(default_factory=list)
    tests_version: str = ""  # "2.18.0" (printed since nccl-tests 2.17.x)
    nccl_version: str = ""  # "2.29.7" (nccl-library=22907, or the JSON's nccl_version)
    time_kind: str = "time"  # "cputime" with -C 1
    validation: int | None = None  # `validation: N` (0 with -c 0)
    out_of_bounds: int | None = None  # `# Out of bounds values : N OK|FAILED`
    avg_busbw_gbps: float | None = None  # depends on the sizes swept: never compared
    gpu_models: tuple[str, ...] = ()  # from the `#  Rank N ...` lines, one per rank
    hosts: tuple[str, ...] = ()
    errors: list[str] = field(default_factory=list)  # "Test NCCL failure ..." and "# error: ..."
    json_path: str = ""  # "# Writing JSON output to <path>"
    footer: bool = False  # the `# Out of bounds values` footer was printed: the sweep finished
    skipped_lines: int = 0  # lines in the table that were neither rows nor known noise

    @property
    def wrong_results(self) -> bool:
        if self.out_of_bounds:
            return True
        return any(m is not None and m.wrong_results
                   for r in self.rows for m in (r.out_of_place, r.in_place))

    @property
    def nodes(self) -> int:
        return len(set(self.hosts))


# -- perftest --------------------------------------------------------------------------------

@dataclass(frozen=True)
class PerftestRow:
    size: int  # bytes
    iterations: int
    # latency tests (µs): t_min, t_max, t_typical (median), t_avg, t_stdev, p99, p99.9
    latency_us: dict[str, float] = field(default_factory=dict)
    # bandwidth tests, in bytes per second: peak, average; message rate in messages per second
    bandwidth: dict[str, float] = field(default_factory=dict)
    msg_rate: float | None = None


@dataclass
class PerftestResult:
    test: str = ""  # "ib_write_lat", "ib_write_bw", "ib_read_lat", ...
    kind: str = ""  # "lat" or "bw"
    device: str = ""  # "mlx5_0" from `Device : ...`
    link_type: str = ""  # "IB" or "Ethernet"
    rows: list[PerftestRow] = field(default_factory=list)
    role: str = "client"  # "server" for the report printed after "Waiting for client to connect"
    bw_unit: str = ""  # "MB/sec", "MiB/sec" or "Gb/sec" as printed
    errors: list[str] = field(default_factory=list)
    skipped_lines: int = 0  # lines under the table header that were not a row of it
    source_format: str = "text"  # "text", "json" or "json-legacy" (unquoted keys, before 2024)
    peak_measured: bool = True  # False after "BW peak won't be measured" (--run_infinitely, -D)
