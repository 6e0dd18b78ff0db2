"""The dcgm source: mapping a real-format dcgm-exporter exposition (sentinels, MIG labels, both
host label spellings, Kubernetes labels) served over real HTTP, and nvml + dcgm together
without duplicate series."""

from __future__ import annotations

import asyncio
import collections
import logging
import re

import aiohttp
import pytest
import yaml

from conftest import running_daemon
from helpers import parse_exposition, samples_of, value
from infrapulse.simulate import nvml_fake
from infrapulse.simulate.dcgm_exporter import FakeDcgmExporter, GpuExposition
from infrapulse.simulate.nvml_fake import DEFAULT_DATA, FakeNvml
from infrapulse.sources.gpu.dcgm import DcgmMapper, is_blank
from infrapulse.textparse import parse

U0 = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"
U1 = "GPU-9b2f5c1e-0c7d-4a38-8f61-2a4c1d7e3b90"
# The label sets, in dcgm-exporter's order: GPU 0 runs a pod; GPU 1 is a MIG GPU (an instance puts
# GPU_I_PROFILE and GPU_I_ID between the two halves) with the empty pod labels dcgm-exporter writes.
GPU0_LABELS = ('gpu="0",UUID="{u0}",pci_bus_id="00000000:18:00.0",device="nvidia0",'
               'modelName="NVIDIA H100 80GB HBM3",{host}="node1",DCGM_FI_DRIVER_VERSION="570.133.20",'
               'container="vllm",namespace="llm",pod="vllm-0"')
GPU1_HEAD = ('gpu="1",UUID="{u1}",pci_bus_id="00000000:2A:00.0",device="nvidia1",'
             'modelName="NVIDIA H100 80GB HBM3"')
GPU1_TAIL = '{host}="node1",DCGM_FI_DRIVER_VERSION="570.133.20",container="",namespace="",pod=""'
PCIE_TX_HELP = ("The rate of data transmitted over the PCIe bus - including both protocol headers and data "
                "payloads - in bytes per second.")
# In dcgm-exporter's template order; {host} is `Hostname` (released 4.5.x) or `hostname` (2026 rename).
EXPOSITION = """\
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{{{g0}}} 1980
DCGM_FI_DEV_SM_CLOCK{{{g1},{g1_tail}}} 1755
# HELP DCGM_FI_DEV_MEM_CLOCK Memory clock frequency (in MHz).
# TYPE DCGM_FI_DEV_MEM_CLOCK gauge
DCGM_FI_DEV_MEM_CLOCK{{{g0}}} 2619
# HELP DCGM_FI_DEV_MEMORY_TEMP Memory temperature (in C).
# TYPE DCGM_FI_DEV_MEMORY_TEMP gauge
DCGM_FI_DEV_MEMORY_TEMP{{{g0}}} 9223372036854775794
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{{{g0}}} 64
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{{{g0}}} 512.347
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{g0}}} 912345678
# HELP DCGM_FI_DEV_PCIE_REPLAY_COUNTER Total number of PCIe retries.
# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER counter
DCGM_FI_DEV_PCIE_REPLAY_COUNTER{{{g0}}} 3
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{{{g0}}} 87
# HELP DCGM_FI_DEV_MEM_COPY_UTIL Memory utilization (in %).
# TYPE DCGM_FI_DEV_MEM_COPY_UTIL gauge
DCGM_FI_DEV_MEM_COPY_UTIL{{{g0}}} 41
# HELP DCGM_FI_DEV_ENC_UTIL Encoder utilization (in %).
# TYPE DCGM_FI_DEV_ENC_UTIL gauge
DCGM_FI_DEV_ENC_UTIL{{{g0}}} 0
# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{{{g0},err_code="79",err_msg="GPU has fallen off the bus"}} 79
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{{{g0}}} 21000
DCGM_FI_DEV_FB_FREE{{{g1},GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",{g1_tail}}} 20000
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{{{g0}}} 60000
DCGM_FI_DEV_FB_USED{{{g1},GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",{g1_tail}}} 20480
DCGM_FI_DEV_FB_USED{{{g1},GPU_I_PROFILE="1g.10gb",GPU_I_ID="5",{g1_tail}}} 2048
# HELP DCGM_FI_DEV_FB_RESERVED Framebuffer memory reserved (in MiB).
# TYPE DCGM_FI_DEV_FB_RESERVED gauge
DCGM_FI_DEV_FB_RESERVED{{{g0}}} 541
# HELP DCGM_FI_DEV_ECC_DBE_VOL_TOTAL Total number of double-bit volatile ECC errors.
# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{g0}}} 2
# HELP DCGM_FI_DEV_ROW_REMAP_FAILURE Whether remapping of rows has failed
# TYPE DCGM_FI_DEV_ROW_REMAP_FAILURE gauge
DCGM_FI_DEV_ROW_REMAP_FAILURE{{{g0}}} 0
# HELP DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS Number of remapped rows for correctable errors
# TYPE DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS counter
DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS{{{g0}}} 4
# HELP DCGM_FI_DEV_THERMAL_VIOLATION Throttling duration due to thermal constraints (in ns).
# TYPE DCGM_FI_DEV_THERMAL_VIOLATION counter
DCGM_FI_DEV_THERMAL_VIOLATION{{{g0}}} 2500000000
# HELP DCGM_FI_DEV_CLOCK_THROTTLE_REASONS Current clock throttle reasons.
# TYPE DCGM_FI_DEV_CLOCK_THROTTLE_REASONS gauge
DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{{{g0}}} 72
# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{g0}}} 0.843921
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{g1},GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",{g1_tail}}} 0.5
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{g1},GPU_I_PROFILE="1g.10gb",GPU_I_ID="5",{g1_tail}}} 140737488355328
# HELP DCGM_FI_PROF_PIPE_TENSOR_ACTIVE Ratio of cycles the tensor (HMMA) pipe is active.
# TYPE DCGM_FI_PROF_PIPE_TENSOR_ACTIVE gauge
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{g0}}} 0.412
# HELP DCGM_FI_PROF_PCIE_TX_BYTES {pcie_tx_help}
# TYPE DCGM_FI_PROF_PCIE_TX_BYTES gauge
DCGM_FI_PROF_PCIE_TX_BYTES{{{g0}}} 1945600000
# HELP DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT NVSwitch current temperature.
# TYPE DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT gauge
DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT{{nvswitch="0",{host}="node1"}} 44
"""


def exposition(host_label: str) -> str:
    ids = {"u0": U0, "u1": U1, "host": host_label}
    return EXPOSITION.format(g0=GPU0_LABELS.format(**ids), g1=GPU1_HEAD.format(**ids),
                             g1_tail=GPU1_TAIL.format(**ids), pcie_tx_help=PCIE_TX_HELP, **ids)


async def until(predicate, timeout: float = 10.0, what: str = "condition"):
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def scrape_text(daemon) -> str:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{daemon.bound_port}/metrics") as resp:
            return await resp.text()


def dcgm_config(url: str, nvml: dict | None = None, **dcgm) -> str:
    sources = {"dcgm": {"enabled": True, "url": url, "interval": "100ms", "timeout": "1s", **dcgm},
               "nvml": nvml or {"enabled": False}}
    return yaml.safe_dump({"interval": "1s", "sources": sources})


@pytest.mark.parametrize("host_label", ["Hostname", "hostname"])
async def test_real_format_exposition_maps_into_gpu_families(host_label, caplog):
    caplog.set_level(logging.INFO, logger="infrapulse.source.dcgm")
    exporter = FakeDcgmExporter(body=exposition(host_label))
    url = await exporter.start()
    try:
        async with running_daemon(dcgm_config(url), hostname="node1") as daemon:
            await until(lambda: daemon.store.snapshot("dcgm", "dcgm"), what="first scrape")
            values = parse_exposition(await scrape_text(daemon))
    finally:
        await exporter.close()
    pod = {"gpu": "0", "uuid": U0, "pod": "vllm-0", "namespace": "llm", "container": "vllm"}
    assert value(values, "infrapulse_source_up", source="dcgm", target="dcgm") == 1
    assert value(values, "infrapulse_gpu_clock_hertz", **pod, clock="sm") == 1980e6  # MHz -> Hz
    assert value(values, "infrapulse_gpu_clock_hertz", gpu="1", uuid=U1,
                 clock="sm") == 1755e6  # empty pod labels dropped
    assert value(values, "infrapulse_gpu_clock_hertz", **pod, clock="memory") == 2619e6
    assert value(values, "infrapulse_gpu_temperature_celsius", **pod, sensor="gpu") == 64
    # the NOT_SUPPORTED sentinel is absent, not 9.2e18
    assert ("infrapulse_gpu_temperature_celsius",
            frozenset({**pod, "sensor": "memory"}.items())) not in values
    assert value(values, "infrapulse_gpu_power_watts", **pod) == pytest.approx(512.347)
    assert value(values, "infrapulse_gpu_energy_joules_total", **pod) == pytest.approx(912345.678)  # mJ -> J
    assert value(values, "infrapulse_gpu_pcie_replays_total", **pod) == 3
    assert value(values, "infrapulse_gpu_utilization_ratio", **pod) == pytest.approx(0.87)  # % -> ratio
    assert value(values, "infrapulse_gpu_memory_utilization_ratio", **pod) == pytest.approx(0.41)
    assert value(values, "infrapulse_gpu_last_xid", **pod) == 79  # err_code/err_msg labels not carried
    assert value(values, "infrapulse_gpu_memory_used_bytes", **pod) == 60000 * 2**20  # MiB -> bytes
    assert value(values, "infrapulse_gpu_memory_reserved_bytes", **pod) == 541 * 2**20
    assert value(values, "infrapulse_gpu_memory_total_bytes", **pod) == (21000 + 60000 + 541) * 2**20
    assert value(values, "infrapulse_gpu_ecc_errors_total", **pod, type="uncorrected", scope="volatile") == 2
    assert value(values, "infrapulse_gpu_row_remap_failure", **pod) == 0
    assert value(values, "infrapulse_gpu_remapped_rows_total", **pod, type="correctable") == 4
    assert value(values, "infrapulse_gpu_clock_violation_seconds_total", **pod,
                 policy="thermal") == 2.5  # ns -> s
    events = {dict(k)["reason"]: v
              for k, v in samples_of(values, "infrapulse_gpu_clock_event_active").items()}
    assert {r for r, v in events.items() if v == 1} == {"hw_slowdown", "hw_thermal"}  # 72 = 0x8 | 0x40
    assert value(values, "infrapulse_gpu_profiling_graphics_engine_active_ratio",
                 **pod) == pytest.approx(0.843921)
    assert value(values, "infrapulse_gpu_profiling_tensor_pipe_active_ratio", **pod) == pytest.approx(0.412)
    assert value(values, "infrapulse_gpu_profiling_pcie_bytes_per_second", **pod,
                 direction="tx") == 1945600000
    # MIG instances keep the physical gpu/uuid and gain gpu_instance/mig_profile
    mig1 = {"gpu": "1", "uuid": U1, "gpu_instance": "1", "mig_profile": "3g.40gb"}
    assert value(values, "infrapulse_gpu_memory_used_bytes", **mig1) == 20480 * 2**20
    assert value(values, "infrapulse_gpu_memory_total_bytes", **mig1) == (20000 + 20480) * 2**20
    assert value(values, "infrapulse_gpu_profiling_graphics_engine_active_ratio", **mig1) == 0.5
    mig5 = {"gpu": "1", "uuid": U1, "gpu_instance": "5", "mig_profile": "1g.10gb"}
    assert value(values, "infrapulse_gpu_memory_used_bytes", **mig5) == 2048 * 2**20
    # the FP64 blank (2**47) on a profiling field is dropped too
    assert ("infrapulse_gpu_profiling_graphics_engine_active_ratio", frozenset(mig5.items())) not in values
    assert value(values, "infrapulse_gpu_info", gpu="0", uuid=U0, name="NVIDIA H100 80GB HBM3",
                 pci_bus_id="00000000:18:00.0", driver_version="570.133.20") == 1
    # neither host label spelling is exported; NVSwitch entities have no gpu and are skipped
    assert not any(dict(labels).keys() & {"Hostname", "hostname"} for name, labels in values
                   if "_gpu_" in name)
    assert not any(name.startswith("infrapulse_gpu") and dict(labels).get("nvswitch")
                   for name, labels in values)
    # a field without a family, and the NVSwitch one, are counted as unmapped, not dropped quietly
    cov = {"source": "dcgm", "target": "dcgm"}
    assert value(values, "infrapulse_source_unmapped_total", **cov, mapping="DCGM_FI_DEV_ENC_UTIL") >= 1
    assert value(values, "infrapulse_source_unmapped_total", **cov,
                 mapping="DCGM_FI_DEV_NVSWITCH_TEMPERATURE_CURRENT") >= 1
    assert value(values, "infrapulse_source_mapping_series", **cov, mapping="DCGM_FI_DEV_ENC_UTIL") == 0
    assert value(values, "infrapulse_source_mapping_series", **cov, mapping="DCGM_FI_DEV_FB_USED") == 3
    # MEMORY_TEMP arrived, but only as NOT_SUPPORTED: present and yielding nothing
    assert value(values, "infrapulse_source_mapping_series", **cov, mapping="DCGM_FI_DEV_MEMORY_TEMP") == 0
    assert not [r for r in caplog.records if "another host" in r.getMessage()]


def test_a_foreign_host_label_is_reported_once_per_host():
    seen = []
    mapper = DcgmMapper("node2", seen.append)
    families = parse(exposition("hostname"), False)
    snap = mapper.map(families)
    assert set(seen) == {"node1"}  # the source logs once per distinct host
    assert snap.series["infrapulse_gpu_utilization_ratio"]


def test_sentinels():
    assert is_blank(float(0x7FFFFFFFFFFFFFF0), False)
    assert is_blank(9223372036854775794.0, False)  # NOT_SUPPORTED as printed
    assert is_blank(140737488355328.0, True)
    assert is_blank(float("nan"), False)
    assert not is_blank(912345678901234.0, False)  # a big energy counter (mJ) is real data
    assert not is_blank(0.99, True)


async def test_scrape_failure_is_source_down_with_reason():
    exporter = FakeDcgmExporter(body="")
    url = await exporter.start()
    await exporter.close()  # nothing listens there any more
    async with running_daemon(dcgm_config(url)) as daemon:
        await until(lambda: ("dcgm", "dcgm") in daemon.store.status, what="a failed scrape")
        values = parse_exposition(await scrape_text(daemon))
    assert value(values, "infrapulse_source_up", source="dcgm", target="dcgm") == 0
    assert value(values, "infrapulse_source_status_info", source="dcgm", target="dcgm",
                 reason="connection_refused") == 1


# -- nvml and dcgm on one node ------------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? ")


def sample_keys(text: str) -> list[tuple[str, frozenset]]:
    """Every sample's (name, label set), parsed line by line so duplicates are not folded."""
    keys = []
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        name, labels = _SAMPLE.match(line).groups()
        pairs = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', labels or ""))
        keys.append((name, pairs))
    return keys


async def test_nvml_and_dcgm_together_never_duplicate_a_series(tmp_path):
    path = tmp_path / "gpus.yaml"
    path.write_text(DEFAULT_DATA.read_text())
    fake = FakeNvml.from_file(path)
    nvml_fake.register_live(path, fake)
    exporter = FakeDcgmExporter(GpuExposition(fake, hostname="testhost", pods={3: ("vllm", "llm", "vllm-0")}))
    url = await exporter.start()
    try:
        nvml = {"enabled": True, "interval": "100ms", "fake": str(path)}
        async with running_daemon(dcgm_config(url, nvml)) as daemon:
            await until(lambda: daemon.store.snapshot("dcgm", "dcgm")
                        and daemon.store.snapshot("nvml", "nvml"), what="both sources")
            text = await scrape_text(daemon)
    finally:
        nvml_fake.unregister_live(path)
        await exporter.close()
    keys = sample_keys(text)
    duplicates = [k for k, n in collections.Counter(keys).items() if n > 1]
    assert duplicates == []
    gpu_keys = [(n, dict(labels)) for n, labels in keys if n.startswith("infrapulse_gpu_")]
    # each GPU's utilization exactly once, from nvml (dcgm would have added the pod labels on GPU 3)
    util = [labels for n, labels in gpu_keys
            if n == "infrapulse_gpu_utilization_ratio" and labels["gpu"] == "3"]
    assert len(util) == 1 and "pod" not in util[0]
    assert len([1 for n, labels in gpu_keys if n == "infrapulse_gpu_info" and labels["gpu"] == "0"]) == 1
    # profiling comes from dcgm (with its pod labels), and nothing else does
    prof = [labels for n, labels in gpu_keys
            if n.startswith("infrapulse_gpu_profiling_") and labels["gpu"] == "3"]
    assert prof and all(labels.get("pod") == "vllm-0" for labels in prof)
    dcgm_only = {n for n, labels in gpu_keys if labels.get("pod")}
    assert dcgm_only and all(n.startswith("infrapulse_gpu_profiling_") for n in dcgm_only)


async def test_dcgm_alone_provides_every_family_it_maps(tmp_path):
    fake = FakeNvml.from_file(DEFAULT_DATA)
    exporter = FakeDcgmExporter(GpuExposition(fake, hostname="testhost"))
    url = await exporter.start()
    try:
        async with running_daemon(dcgm_config(url)) as daemon:  # nvml disabled
            await until(lambda: daemon.store.snapshot("dcgm", "dcgm"), what="first scrape")
            values = parse_exposition(await scrape_text(daemon))
    finally:
        await exporter.close()
    assert value(values, "infrapulse_gpu_utilization_ratio", gpu="0",
                 uuid=fake.gpus[0].uuid) == pytest.approx(0.92)
    assert value(values, "infrapulse_gpu_memory_used_bytes", gpu="0", uuid=fake.gpus[0].uuid) == \
        (73014444032 // 2**20) * 2**20
    assert samples_of(values, "infrapulse_gpu_profiling_graphics_engine_active_ratio")


async def test_owns_moves_a_family_from_nvml_to_dcgm(tmp_path):
    path = tmp_path / "gpus.yaml"
    path.write_text(DEFAULT_DATA.read_text())
    fake = FakeNvml.from_file(path)
    nvml_fake.register_live(path, fake)
    exporter = FakeDcgmExporter(GpuExposition(fake, hostname="testhost",
                                              pods={0: ("train", "ml", "trainer-0")}))
    url = await exporter.start()
    try:
        nvml = {"enabled": True, "interval": "100ms", "fake": str(path)}
        owns = ["infrapulse_gpu_profiling_*", "infrapulse_gpu_temperature_celsius"]
        async with running_daemon(dcgm_config(url, nvml, owns=owns)) as daemon:
            await until(lambda: daemon.store.snapshot("dcgm", "dcgm")
                        and daemon.store.snapshot("nvml", "nvml"), what="both sources")
            nvml_snap = daemon.store.snapshot("nvml", "nvml")
            dcgm_snap = daemon.store.snapshot("dcgm", "dcgm")
    finally:
        nvml_fake.unregister_live(path)
        await exporter.close()
    assert "infrapulse_gpu_temperature_celsius" not in nvml_snap.series
    temps = dcgm_snap.series["infrapulse_gpu_temperature_celsius"]
    assert temps[("0", fake.gpus[0].uuid, "gpu", "", "", "trainer-0", "ml", "train")] == 66
    assert "infrapulse_gpu_utilization_ratio" in nvml_snap.series
    assert "infrapulse_gpu_utilization_ratio" not in dcgm_snap.series
