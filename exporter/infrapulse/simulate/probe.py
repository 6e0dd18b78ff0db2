"""The demo's probes: fake nccl-tests and perftest executables (probe_fake.py) behind shims in
the work directory, the maintenance flag file that lets them run on the busy demo node, and the
`fw-upgrade-regression` scenario.

fw-upgrade-regression: once the probes have a baseline (BASELINE_ROUNDS rounds at the old
firmware), the mlx5 devices of the node simulator's sysfs tree go from 28.39.1002 to 28.41.1000
and small-message latency rises by 40 % (nccl-tests sizes up to 64 KiB and every perftest
latency), as when a firmware upgrade silently resets congestion-control parameters. The version
change triggers a probe run, whose verdict is a regression with the before -> after recorded.
Switching the scenario off restores both, and the next (change-triggered) run is ok again.
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from .probe_fake import write_shims

if TYPE_CHECKING:  # demo imports every simulator module, so only for the annotations
    from .demo import DemoContext, DemoPart
    from .scenarios import ScenarioBoard

SCENARIOS = {
    "fw-upgrade-regression": "the node's mlx5 NICs go from firmware 28.39.1002 to 28.41.1000 and "
                             "small-message latency rises 40 % (nccl-tests <= 64 KiB, perftest); the "
                             "probes' change-triggered run records the regression before -> after",
}
OLD_FW, NEW_FW = "28.39.1002", "28.41.1000"
LATENCY_FACTOR = 1.4
BASELINE_ROUNDS = 3  # rounds at the old firmware before the upgrade (the demo's baseline.min_runs)
NCCL_RUNS_PER_ROUND = 2


def _free_port_block(count: int) -> int:
    """A base port whose next `count` ports were free a moment ago (the fake perftest servers')."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = int(s.getsockname()[1])
        if base + count > 65000:
            continue
        try:
            for port in range(base, base + count):
                with socket.socket() as t:
                    t.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    return 28515


class FwUpgradeScenario:
    """Applies the scenario to the fakes' state file and to the node's sysfs tree."""

    def __init__(self, board: ScenarioBoard, state_file: Path, sysfs_root: Path) -> None:
        self.board = board
        self.state_file = state_file
        self.sysfs_root = sysfs_root
        self.upgraded = False

    def nccl_runs(self) -> int:
        try:
            lines = Path(f"{self.state_file}.runs").read_text().splitlines()
        except OSError:
            return 0
        return sum(1 for line in lines if line.startswith("all_reduce_perf"))

    def step(self) -> None:
        want = self.board.active("fw-upgrade-regression") and (
            self.upgraded or self.nccl_runs() >= BASELINE_ROUNDS * NCCL_RUNS_PER_ROUND)
        if want == self.upgraded:
            return
        self.upgraded = want
        state = json.loads(self.state_file.read_text())
        state["small_latency_factor"] = LATENCY_FACTOR if want else 1.0
        self.state_file.write_text(json.dumps(state))
        for fw in sorted((self.sysfs_root / "class" / "infiniband").glob("mlx5_*/fw_ver")):
            fw.write_text((NEW_FW if want else OLD_FW) + "\n")

    async def run(self, period: float = 0.5) -> None:
        while True:
            self.step()
            await asyncio.sleep(period)


def drop_job_result(inbox: Path, state_file: Path) -> None:
    """What a multi-node job would leave in the inbox: a 2-node, 16-GPU nccl-tests table (printed by
    the fake with nccl-tests' formats) and its scope sidecar."""
    import contextlib
    import io

    from .probe_fake import all_reduce_perf, load_state

    state = {**load_state(), **json.loads(state_file.read_text()), "gpus": 16}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        all_reduce_perf(["-b", "8", "-e", "1G", "-f", "4", "-g", "16"], state)
    name = "rack1-gpu-node-01-02__demo-job.txt"
    (inbox / f"{name}.scope").write_text("scope: rack1-gpu-node-01-02\ntool: nccl\npath: fabric\n")
    (inbox / name).write_text(out.getvalue())


async def demo_part(ctx: DemoContext) -> DemoPart:
    from .demo import DemoPart

    root = ctx.workdir / "probe"
    root.mkdir(parents=True, exist_ok=True)
    state_file = root / "fake-state.json"
    state_file.write_text(json.dumps({"hostname": ctx.hostname}))
    shims = write_shims(root / "bin", state_file)
    maintenance = root / "maintenance"
    maintenance.write_text("the demo node serves simulated traffic; probes may run anyway\n")
    inbox = root / "inbox"
    inbox.mkdir(exist_ok=True)
    drop_job_result(inbox, state_file)
    sysfs_root = ctx.workdir / "node-sysfs"  # written by the node simulator (simulate/node.py)
    scenario = FwUpgradeScenario(ctx.scenarios, state_file, sysfs_root)
    task = asyncio.create_task(scenario.run(), name="simulate:probe")

    async def close() -> None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    sources = {"probe": {
        "enabled": True, "interval": "6s", "jitter": "1s", "check_interval": "1s", "change_delay": "1s",
        "timeout": "60s", "max_age": "1h",
        "idle": {"gpu_processes": False, "maintenance_file": str(maintenance)},
        "baseline": {"runs": 5, "min_runs": BASELINE_ROUNDS},
        "nccl": {"binary": str(shims["all_reduce_perf"]), "runs": [
            {"name": "nccl_latency", "args": ["-b", "8", "-e", "32K", "-f", "2", "-g", "{gpus}"]},
            {"name": "nccl_bandwidth", "args": ["-b", "64M", "-e", "256M", "-f", "2", "-g", "{gpus}"]}]},
        "perftest": {"latency_binary": str(shims["ib_write_lat"]),
                     "bandwidth_binary": str(shims["ib_write_bw"]),
                     "pairs": ["mlx5_0:mlx5_1"], "latency_sizes": [8], "bandwidth_sizes": [65536],
                     "latency_iterations": 1000, "bandwidth_iterations": 1000,
                     "base_port": _free_port_block(2)},
        "inbox": {"dir": str(inbox), "settle": "1s"},
        "versions": {"sysfs_root": str(sysfs_root)},
    }}
    return DemoPart("probe", sources, close, settings={"state_dir": str(ctx.workdir / "state")},
                    description=f"fake nccl-tests/perftest in {root / 'bin'}; inbox {inbox}; "
                                "maintenance flag set")
