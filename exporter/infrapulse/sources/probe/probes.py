"""The two probes the source runs itself, and what a run yields.

* `NcclProbe`: nccl-tests (all_reduce_perf by default) on this node's GPUs. On one node this
  measures NVLink/P2P/SHM, not the NIC or the switches: its results carry path="intra_node".
  With `json: true` it passes `-J <fresh dir>/nccl.json` and reads back the file named on the
  "# Writing JSON output to" line; the text table stays the primary source when that fails.
* `PerftestProbe`: ib_write_lat / ib_write_bw between two RDMA NICs of this node (a server on
  one, the client on the other, exchanging over a loopback TCP port): the traffic leaves
  through one NIC, crosses the switches and comes back through the other (path="fabric").
  One message size per call, because `--out_json_file` is rewritten per report.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import families as fam
from . import nccl, perftest, runner
from .baseline import Observation, nccl_observations, perftest_observations
from .results import NcclResult, PerftestResult, ProbeParseError

SeriesList = list[tuple[str, tuple[str, ...], float]]  # (family, label values, value)
LATENCY_STATISTICS = {"t_min": "min", "t_max": "max", "t_typical": "typical", "t_avg": "average",
                      "t_stdev": "stdev", "p99": "p99", "p99_9": "p99_9"}
SERVER_READY_SECONDS = 5.0


@dataclass
class ProbeRun:
    """One attempt of one probe."""

    name: str
    result: str  # ok, no_binary, timeout, failed, wrong_results (busy is decided before running)
    message: str = ""
    duration: float = 0.0
    observations: list[Observation] = field(default_factory=list)
    series: SeriesList = field(default_factory=list)
    nccl_version: str = ""
    output: str = ""  # stdout of the (last) process, kept for the operator


@dataclass(frozen=True)
class RunContext:
    workdir: Path  # a fresh directory for this run's files
    deadline: float  # time.monotonic() by which the whole probe is killed
    env: dict[str, str]
    nice: int
    io_idle: bool


def nccl_series(result: NcclResult, scope: str, path: str) -> SeriesList:
    out: SeriesList = []
    for row in result.rows:
        for placement, m in (("out_of_place", row.out_of_place), ("in_place", row.in_place)):
            if m is None:
                continue
            labels = (scope, path, result.collective or "nccl", row.dtype, row.redop, str(row.size),
                      placement)
            out.append((fam.NCCL_TIME.name, labels, m.time_us * 1e-6))
            out.append((fam.NCCL_ALGBW.name, labels, m.algbw_gbps * 1e9))
            out.append((fam.NCCL_BUSBW.name, labels, m.busbw_gbps * 1e9))
            if m.wrong is not None:
                out.append((fam.NCCL_WRONG.name, labels, m.wrong))
    return out


def perftest_series(result: PerftestResult, scope: str, path: str) -> SeriesList:
    out: SeriesList = []
    for row in result.rows:
        base = (scope, path, result.test, result.device, str(row.size))
        for column, value in row.latency_us.items():
            out.append((fam.RDMA_LATENCY.name, base + (LATENCY_STATISTICS[column],), value * 1e-6))
        for statistic, value in row.bandwidth.items():
            out.append((fam.RDMA_BANDWIDTH.name, base + (statistic,), value))
        if row.msg_rate is not None:
            out.append((fam.RDMA_MSG_RATE.name, base, row.msg_rate))
    return out


class NcclProbe:
    def __init__(self, name: str, binary: str, args: list[str], json_output: bool, latency_max: int,
                 bandwidth_min: int) -> None:
        self.name = name
        self.binary = binary
        self.args = args
        self.json_output = json_output
        self.latency_max = latency_max
        self.bandwidth_min = bandwidth_min

    async def run(self, ctx: RunContext, gpus: int) -> ProbeRun:
        path = runner.resolve(self.binary)
        if path is None:
            return ProbeRun(self.name, "no_binary", f"{self.binary}: not found or not executable")
        argv = [path] + [a.replace("{gpus}", str(gpus)) for a in self.args]
        if self.json_output:
            argv += ["-J", str(ctx.workdir / "nccl.json")]
        outcome = await runner.run(argv, ctx.workdir / "stdout.txt", ctx.deadline - time.monotonic(), ctx.env,
                                   str(ctx.workdir), ctx.nice, ctx.io_idle)
        run = ProbeRun(self.name, outcome.status, outcome.message, outcome.duration, output=outcome.output)
        if outcome.status == "timeout":
            return run
        try:
            result = nccl.parse_text(outcome.output, nccl.collective_of(self.binary))
        except ProbeParseError as exc:
            run.result = "failed"
            run.message = "; ".join(x for x in (outcome.message, str(exc)) if x)
            return run
        result = self._json_result(result, ctx, run)
        run.nccl_version = result.nccl_version
        run.series = nccl_series(result, "local", "intra_node")
        # Wrong results first: nccl-tests prints "Test failure" and exits non-zero on #wrong > 0,
        # and data corruption must never read as a generic failure.
        if result.wrong_results:
            run.result = "wrong_results"
            run.message = _wrong_message(result)
            return run
        if result.errors or outcome.status != "ok" or not result.rows:
            run.result = "failed"
            run.message = "; ".join(x for x in (result.errors[0] if result.errors else "no result rows",
                                                outcome.message) if x)
            return run
        run.observations = nccl_observations(result, "local", "intra_node", self.latency_max,
                                             self.bandwidth_min)
        run.result = "ok"
        return run

    def _json_result(self, text_result: NcclResult, ctx: RunContext, run: ProbeRun) -> NcclResult:
        """The -J file named on the "# Writing JSON output to" line, when it is ours."""
        if not self.json_output or not text_result.json_path:
            return text_result
        json_path = Path(text_result.json_path)
        if json_path.parent.resolve() != ctx.workdir.resolve():
            return text_result
        try:
            parsed = nccl.parse_json(json_path.read_text(encoding="utf-8"), text_result.collective)
        except (OSError, ProbeParseError) as exc:
            run.message = f"JSON output unusable, the text table is used: {exc}"
            return text_result
        parsed.errors.extend(e for e in text_result.errors if e not in parsed.errors)
        parsed.tests_version = text_result.tests_version
        return parsed


def _wrong_message(result: NcclResult) -> str:
    rows = [r.size for r in result.rows
            for m in (r.out_of_place, r.in_place) if m is not None and m.wrong_results]
    where = f" at sizes {', '.join(str(s) for s in sorted(set(rows))[:5])}" if rows else ""
    name = result.collective or "nccl"
    return f"{name} returned wrong results{where} (out of bounds: {result.out_of_bounds})"


@dataclass(frozen=True)
class Pair:
    client: str
    server: str

    @property
    def scope(self) -> str:
        return f"{self.client}->{self.server}"


class PerftestProbe:
    def __init__(self, name: str, binary: str, pairs: list[Pair], sizes: list[int], iterations: int,
                 base_port: int, server_host: str, json_mode: str, gbits: bool, extra_args: list[str],
                 nic_models: dict[str, str]) -> None:
        self.name = name
        self.binary = binary
        self.pairs = pairs
        self.sizes = sizes
        self.iterations = iterations
        self.base_port = base_port
        self.server_host = server_host
        self.json_mode = json_mode
        self.gbits = gbits
        self.extra_args = extra_args
        self.nic_models = nic_models
        self._json_support: dict[str, bool] = {}

    async def _supports_json(self, path: str, ctx: RunContext) -> bool:
        """`auto`: whether this binary's --help mentions --out_json (perftest 4.5+)."""
        if self.json_mode != "auto":
            return self.json_mode == "true"
        if path not in self._json_support:
            outcome = await runner.run([path, "--help"], ctx.workdir / "help.txt", 10.0, ctx.env,
                                       str(ctx.workdir),
                                       ctx.nice, ctx.io_idle)
            self._json_support[path] = "out_json" in outcome.output
        return self._json_support[path]

    async def run(self, ctx: RunContext) -> ProbeRun:
        path = runner.resolve(self.binary)
        if path is None:
            return ProbeRun(self.name, "no_binary", f"{self.binary}: not found or not executable")
        if not self.pairs:
            return ProbeRun(self.name, "failed",
                            "no pair of RDMA devices to run between (sources.probe.perftest"
                                                 ".pairs, or two RDMA devices in sysfs)")
        use_json = await self._supports_json(path, ctx)
        started = time.monotonic()
        run = ProbeRun(self.name, "ok")
        for i, pair in enumerate(self.pairs):
            for size in self.sizes:
                problem = await self._one(path, pair, size, self.base_port + i, use_json, ctx, run)
                if problem is not None:
                    run.result, run.message = problem
                    run.duration = time.monotonic() - started
                    return run
        run.duration = time.monotonic() - started
        return run

    def _argv(self, path: str, device: str, port: int, size: int) -> list[str]:
        argv = [path, "-d", device, "-p", str(port), "-s", str(size), "-n", str(self.iterations),
                *self.extra_args]
        return argv + (["--report_gbits"] if self.gbits else [])

    async def _one(self, path: str, pair: Pair, size: int, port: int, use_json: bool, ctx: RunContext,
                   run: ProbeRun) -> tuple[str, str] | None:
        """Server, then client, for one size; None when it went well, else (result, message)."""
        tag = f"{pair.scope}-{size}".replace(">", "")
        try:
            server = runner.Process(self._argv(path, pair.server, port, size),
                                    ctx.workdir / f"server-{tag}.txt",
                                    ctx.env, str(ctx.workdir), ctx.nice, ctx.io_idle)
        except OSError as exc:
            return "failed", f"cannot start the {pair.server} server: {exc.strerror or exc}"
        try:
            await _wait_listening(server, min(ctx.deadline, time.monotonic() + SERVER_READY_SECONDS))
            return await self._client(path, pair.client, port, size, self.server_host, pair.scope, tag,
                                      use_json, ctx, run)
        finally:
            await server.wait(time.monotonic() + 2.0)

    async def _client(self, path: str, device: str, port: int, size: int, host: str, scope: str, tag: str,
                      use_json: bool, ctx: RunContext, run: ProbeRun) -> tuple[str, str] | None:
        """Run the client side against a listening server (this node's other NIC or a peer's) and
        add its series and observations to `run`; (status, message) when it did not succeed."""
        argv = self._argv(path, device, port, size)
        json_file = ctx.workdir / f"client-{tag}.json"
        if use_json:
            argv += ["--out_json", "--out_json_file", str(json_file)]
        outcome = await runner.run(argv + [host], ctx.workdir / f"client-{tag}.txt",
                                   ctx.deadline - time.monotonic(), ctx.env, str(ctx.workdir), ctx.nice,
                                   ctx.io_idle)
        run.output = outcome.output
        if outcome.status != "ok":
            return outcome.status, f"{scope} size {size}: {outcome.message}"
        try:
            result = self._parse(outcome.output, json_file if use_json else None)
        except ProbeParseError as exc:
            return "failed", f"{scope} size {size}: {exc}"
        result.device = result.device or device
        run.series += perftest_series(result, scope, "fabric")
        run.observations += perftest_observations(result, scope, "fabric", self.nic_models.get(device, ""))
        return None

    def _parse(self, text: str, json_file: Path | None) -> PerftestResult:
        if json_file is not None and json_file.exists():
            return perftest.parse_json(json_file.read_text(encoding="utf-8", errors="replace"), self.gbits)
        reports = perftest.parse_text(text)
        clients = [r for r in reports if r.role == "client"] or reports
        return clients[0]


async def _wait_listening(server: runner.Process, deadline: float) -> None:
    """Until the server printed perftest's "Waiting for client to connect" (or exited)."""
    while time.monotonic() < deadline and server.proc.poll() is None:
        if "Waiting for client" in server.output():
            return
        await asyncio.sleep(0.05)
