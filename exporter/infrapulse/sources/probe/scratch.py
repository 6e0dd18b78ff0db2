"""One probe of a scheduled run, in a scratch directory of its own under the state directory,
removed afterwards whatever happens: nccl-tests' JSON holds the whole environment, which may
carry secrets. The run gets the source's deadline, environment and lowered priority.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from .config import ProbeSettings
from .probes import NcclProbe, PerftestProbe, ProbeRun, RunContext


async def run_probe(probe: NcclProbe | PerftestProbe, parent: Path, cfg: ProbeSettings,
                    gpu_count: Callable[[], int]) -> ProbeRun:
    workdir = Path(tempfile.mkdtemp(prefix=f"{probe.name}.", dir=parent))
    try:
        ctx = RunContext(workdir, time.monotonic() + cfg.timeout, {**os.environ, **cfg.env}, cfg.nice,
                         cfg.io_idle)
        return await (probe.run(ctx, gpu_count()) if isinstance(probe, NcclProbe) else probe.run(ctx))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
