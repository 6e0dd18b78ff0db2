"""The demo's GPUs: the data-driven NVML fake and a fake dcgm-exporter over the same GPUs."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from .dcgm_exporter import FakeDcgmExporter, GpuExposition
from .nvml_fake import DEFAULT_DATA, FakeNvml, register_live, unregister_live
from .nvml_fake import SCENARIOS as SCENARIOS  # the demo lists the SCENARIOS of modules with a demo_part

if TYPE_CHECKING:  # demo imports every simulator module, so only for the annotations
    from .demo import DemoContext, DemoPart

# Kubernetes attribution the demo's dcgm-exporter puts on GPUs (as its pod-resources mapping would).
DEMO_PODS: dict[int | tuple[int, int], tuple[str, str, str]] = {
    1: ("sglang", "llm", "sglang-qwen-0"),
    3: ("vllm", "llm", "vllm-llama-70b-0"),
    4: ("vllm", "llm", "vllm-llama-70b-1"),
}


async def demo_part(ctx: DemoContext) -> DemoPart:
    """The node's GPUs: nvml reads the fake, dcgm reads a fake dcgm-exporter over the same GPUs.

    Both sources run, as they would on a node with dcgm-exporter deployed: dcgm provides only
    the profiling families and nvml everything else (gpu_families.Ownership), so no series is
    exported twice.
    """
    from .demo import DemoPart

    data = ctx.workdir / "gpus.yaml"
    shutil.copyfile(DEFAULT_DATA, data)
    fake = FakeNvml.from_file(data, scenarios=ctx.scenarios)
    register_live(data, fake)
    xid = fake.spec.get("scenarios", {}).get("xid")
    if xid:  # the serving engine on that GPU follows it (fault_coupling.py)
        ctx.scenarios.place("xid", ctx.hostname, f"gpu{int(xid.get('gpu', 0)) % len(fake.gpus)}")
    exporter = FakeDcgmExporter(GpuExposition(fake, hostname=ctx.hostname, pods=DEMO_PODS))
    try:
        url = await exporter.start()
    except BaseException:
        unregister_live(data)
        raise

    async def close() -> None:
        unregister_live(data)
        await exporter.close()

    sources = {
        "nvml": {"enabled": True, "fake": str(data)},
        "dcgm": {"enabled": True, "url": url},
    }
    return DemoPart("gpu", sources, close,
                    description=f"{len(fake.gpus)} fake GPUs from {data}; fake dcgm-exporter at {url}")
