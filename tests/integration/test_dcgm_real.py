"""The dcgm source against real dcgm-exporter expositions (shared/real/serving/dcgm-*, PROVENANCE.md).

Each capture is served verbatim by the fake dcgm-exporter's aiohttp server on loopback and
scraped by a running daemon's dcgm source; assertions are the capture's numbers after unit
conversion. The MIG captures prove that physical-GPU fields, which dcgm-exporter repeats on
every GPU instance, are exported once per GPU (before: power summed 4x on a 4-slice A30).
"""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
import yaml

from conftest import running_daemon
from helpers import parse_exposition, real, samples_of, value
from infrapulse.simulate.dcgm_exporter import FakeDcgmExporter, GpuExposition
from infrapulse.simulate.nvml_fake import FakeNvml
from infrapulse.sources.gpu.dcgm import EXPECTED_FIELDS, DcgmMapper
from infrapulse.textparse import parse

A30_0 = "GPU-265c9814-6156-355b-e589-ff2064894f16"
A30_1 = "GPU-2d20791a-b4a6-ba59-97f1-e95b99fe5b49"
COV = {"source": "dcgm", "target": "dcgm"}
POD_LABELS = {"pod", "namespace", "container", "gpu_instance", "mig_profile", "Hostname", "hostname"}


async def scrape(capture: str) -> tuple[dict, dict]:
    """(values on the daemon's /metrics, its /api/v1/sources entry for dcgm) after one scrape."""
    exporter = FakeDcgmExporter(body=real("serving", capture).read_text())
    url = await exporter.start()
    cfg = yaml.safe_dump({"interval": "1s", "sources": {
        "dcgm": {"enabled": True, "url": url, "interval": "100ms", "timeout": "1s"},
        "nvml": {"enabled": False}}})
    try:
        async with running_daemon(cfg, hostname="testhost") as daemon:
            for _ in range(100):
                if daemon.store.snapshot("dcgm", "dcgm"):
                    break
                await asyncio.sleep(0.05)
            base = f"http://127.0.0.1:{daemon.bound_port}"
            async with aiohttp.ClientSession() as session:
                async with session.get(base + "/metrics") as resp:
                    values = parse_exposition(await resp.text())
                async with session.get(base + "/api/v1/sources") as resp:
                    api = await resp.json()
    finally:
        await exporter.close()
    entry = next(s for s in api["sources"] if s["source"] == "dcgm")
    return values, entry


def series(values: dict, name: str) -> dict[frozenset, float]:
    return samples_of(values, name)


def mapping(values: dict, field: str) -> float:
    return value(values, "infrapulse_source_mapping_series", **COV, mapping=field)


async def test_a30_mig_3x_power_once_per_physical_gpu():
    values, entry = await scrape("dcgm-3.x-a30mig-issue317.prom")
    power = {dict(k)["gpu"]: (dict(k), v) for k, v in series(values, "infrapulse_gpu_power_watts").items()}
    assert len(series(values, "infrapulse_gpu_power_watts")) == 2  # 6 instance rows -> 2 GPUs
    # GPU 0's four copies read 52.636, 52.636, 52.746, 52.746 W: the lowest GPU_I_ID's (3) is kept
    assert power["0"] == ({"gpu": "0", "uuid": A30_0}, 52.636)
    assert power["1"] == ({"gpu": "1", "uuid": A30_1}, 56.121)
    assert sum(v for _, v in power.values()) == pytest.approx(108.757)  # was 322.012 summed over rows
    # identity: one row per physical GPU and one per instance
    info = [dict(k) for k in series(values, "infrapulse_gpu_info")]
    assert sorted((i["gpu"], i.get("gpu_instance", "")) for i in info) == [
        ("0", ""), ("0", "3"), ("0", "4"), ("0", "5"), ("0", "6"), ("1", ""), ("1", "3"), ("1", "4")]
    assert all(i["name"] == "NVIDIA A30" for i in info)
    assert {i.get("mig_profile") for i in info if i.get("gpu_instance")} == {"1g.6gb"}
    # only POWER_USAGE is in the excerpt: the other default fields are reported as yielding nothing
    assert mapping(values, "DCGM_FI_DEV_POWER_USAGE") == 2
    assert sorted(entry["coverage"]["empty"]) == sorted(f for f in EXPECTED_FIELDS
                                                        if f != "DCGM_FI_DEV_POWER_USAGE")


async def test_a30_mig_4x_physical_temperature_without_pod_labels_and_instance_memory_with_them():
    values, entry = await scrape("dcgm-4.x-a30mig-ada-pr736-2026.prom")
    temps = {dict(k)["gpu"]: (dict(k), v)
             for k, v in series(values, "infrapulse_gpu_temperature_celsius").items()}
    assert len(temps) == 3 and len(series(values, "infrapulse_gpu_temperature_celsius")) == 3
    assert temps["1"] == ({"gpu": "1", "uuid": "GPU-fc60126e-514d-3522-2828-c5daa8e99d85", "sensor": "gpu"},
                          44)
    # A30s in MIG mode: the die temperature belongs to the GPU, not to the Triton pod on instance 3
    assert temps["2"] == ({"gpu": "2", "uuid": "GPU-63bc0b91-2265-1b94-831c-15c41fe92675", "sensor": "gpu"},
                          45)
    assert temps["0"] == ({"gpu": "0", "uuid": "GPU-9a63752e-af8d-fe52-7f0d-968bca6d52e3", "sensor": "gpu"},
                          50)
    assert value(values, "infrapulse_gpu_memory_used_bytes", gpu="0",
                 uuid="GPU-9a63752e-af8d-fe52-7f0d-968bca6d52e3", gpu_instance="6", mig_profile="1g.6gb",
                 pod="triton-server-f7cb5d77-2w5b2", namespace="default",
                 container="triton-server") == 3744 * 2**20
    # FB_FREE without FB_USED on the same instance gives no total; nothing else carries pod labels
    pods = [n for (n, labels) in values if n.startswith("infrapulse_gpu_") and dict(labels).get("pod")]
    assert pods == ["infrapulse_gpu_memory_used_bytes"]
    assert not any(dict(labels).keys() & {"hostname", "Hostname"} for n, labels in values if "_gpu_" in n)
    # encoder/decoder utilisation have no family: counted, not dropped quietly
    assert value(values, "infrapulse_source_unmapped_total", **COV, mapping="DCGM_FI_DEV_DEC_UTIL") >= 1
    assert mapping(values, "DCGM_FI_DEV_ENC_UTIL") == 0
    assert entry["coverage"]["unmapped_total"] >= 2
    assert mapping(values, "DCGM_FI_DEV_GPU_TEMP") == 3
    assert mapping(values, "DCGM_FI_DEV_FB_FREE") == 0  # present, but yields no total alone


async def test_dcgm_2x_without_help_and_with_empty_pod_labels():
    values, entry = await scrape("dcgm-2.x-gpumontools138-2020.prom")
    gpu = {"gpu": "0", "uuid": "GPU-6bf47ca9-ad3e-15db-beed-1079a7d74116"}
    assert value(values, "infrapulse_gpu_clock_hertz", **gpu, clock="sm") == 1530e6
    assert value(values, "infrapulse_gpu_clock_hertz", **gpu, clock="memory") == 877e6
    assert value(values, "infrapulse_gpu_temperature_celsius", **gpu, sensor="memory") == 54
    assert value(values, "infrapulse_gpu_temperature_celsius", **gpu, sensor="gpu") == 55
    assert value(values, "infrapulse_gpu_power_watts", **gpu) == 302.206
    assert value(values, "infrapulse_gpu_energy_joules_total", **gpu) == pytest.approx(4335301.032)  # mJ -> J
    assert value(values, "infrapulse_gpu_pcie_replays_total", **gpu) == 0
    assert value(values, "infrapulse_gpu_utilization_ratio", **gpu) == pytest.approx(0.44)
    # container="", namespace="", pod="" are no labels at all
    assert not any(dict(k).keys() & POD_LABELS for n, k in values if n.startswith("infrapulse_gpu_"))
    assert sorted(entry["coverage"]["empty"]) == ["DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED",
                                                  "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_XID_ERRORS"]


async def test_dcgm_2x_t4_with_hostname_label():
    values, entry = await scrape("dcgm-2.x-t4-datadog.prom")
    gpu = {"gpu": "0", "uuid": "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"}
    assert value(values, "infrapulse_gpu_clock_hertz", **gpu, clock="sm") == 300e6
    assert value(values, "infrapulse_gpu_clock_hertz", **gpu, clock="memory") == 405e6
    assert value(values, "infrapulse_gpu_temperature_celsius", **gpu, sensor="gpu") == 25
    assert value(values, "infrapulse_gpu_power_watts", **gpu) == 8.969
    assert value(values, "infrapulse_gpu_energy_joules_total", **gpu) == pytest.approx(128996.013)
    assert value(values, "infrapulse_gpu_utilization_ratio", **gpu) == 0
    assert value(values, "infrapulse_gpu_memory_used_bytes", **gpu) == 0
    assert value(values, "infrapulse_gpu_memory_total_bytes", **gpu) == 15109 * 2**20  # free + used
    assert value(values, "infrapulse_gpu_last_xid", **gpu) == 0
    assert value(values, "infrapulse_gpu_info", **gpu, name="Tesla T4", driver_version="460.106.00") == 1
    assert not any(dict(k).keys() & POD_LABELS for n, k in values if n.startswith("infrapulse_gpu_"))
    unmapped = {f: value(values, "infrapulse_source_unmapped_total", **COV, mapping=f)
                for f in ("DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL",
                          "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
                          "DCGM_FI_DEV_COUNT")}
    assert all(n >= 1 for n in unmapped.values()), unmapped
    assert entry["coverage"]["empty"] == sorted(unmapped)  # every expected field present; T4 has no HBM temp


def test_mig_copy_rules_counters_take_the_newest_gauges_the_lowest_instance():
    text = real("serving", "dcgm-3.x-a30mig-issue317.prom").read_text()
    text += ("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n" + "".join(
        f'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu="0",UUID="{A30_0}",'
        f'GPU_I_PROFILE="1g.6gb",GPU_I_ID="{gi}"}} {mj}\n' for gi, mj in ((3, 1000), (4, 1007), (5, 1003))))
    snap = DcgmMapper().map(parse(text))
    energy = snap.series["infrapulse_gpu_energy_joules_total"]
    # the largest: the newest reading
    assert energy == {("0", A30_0, "", "", "", "", ""): pytest.approx(1.007)}
    assert snap.series["infrapulse_gpu_power_watts"][("0", A30_0, "", "", "", "", "")] == 52.636


def test_simulated_mig_gpu_repeats_physical_fields_like_the_captures():
    fake = FakeNvml.from_file()
    text = GpuExposition(fake, pods={(2, 1): ("vllm", "llm", "vllm-mig-0")}).render()
    rows = [line for line in text.splitlines()
            if line.startswith("DCGM_FI_DEV_POWER_USAGE") and 'gpu="2"' in line]
    assert len(rows) == 3 and all("GPU_I_ID=" in r for r in rows)  # one per instance, no GPU row
    assert len({r.rsplit(" ", 1)[1] for r in rows}) == 2  # copies read a moment apart differ a little
    assert 'pod="vllm-mig-0"' in rows[0]
    util = [line for line in text.splitlines()
            if line.startswith("DCGM_FI_DEV_GPU_UTIL{") and 'gpu="2"' in line]
    assert len(util) == 3 and all(line.endswith(" 0") for line in util)
    snap = DcgmMapper().map(parse(text))
    power = {k: v for k, v in snap.series["infrapulse_gpu_power_watts"].items() if k[0] == "2"}
    assert power == {("2", fake.gpus[2].uuid, "", "", "", "", ""): 388.0}
    assert not [k for k in snap.series["infrapulse_gpu_utilization_ratio"] if k[0] == "2"]  # 0 is no reading
    used = {k[2]: v for k, v in snap.series["infrapulse_gpu_memory_used_bytes"].items() if k[0] == "2"}
    assert used == {"1": 21474836480.0, "2": 6442450944.0, "5": 2147483648.0}


def test_violation_unit_follows_the_help_text():
    def exposition(unit: str) -> str:
        return ("# HELP DCGM_FI_DEV_POWER_VIOLATION Throttling duration due to power constraints (in "
                f"{unit}).\n# TYPE DCGM_FI_DEV_POWER_VIOLATION counter\n"
                f'DCGM_FI_DEV_POWER_VIOLATION{{gpu="0",UUID="{A30_0}"}} 2500000\n')

    key = ("0", A30_0, "power", "", "", "", "", "")
    # etc/default-counters.csv said "(in us)" (dcgm-exporter @ 00d6d344), "(in ns)" from 4.6.0-4.8.3
    violation = "infrapulse_gpu_clock_violation_seconds_total"
    assert DcgmMapper().map(parse(exposition("us"))).series[violation] == {key: pytest.approx(2.5)}
    assert DcgmMapper().map(parse(exposition("ns"))).series[violation] == {key: pytest.approx(0.0025)}
