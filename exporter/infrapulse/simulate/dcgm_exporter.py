"""A fake dcgm-exporter: an aiohttp /metrics endpoint on loopback in dcgm-exporter's format.

The body follows dcgm-exporter's text template (rendermetrics/render_metrics.go): metric =
DCGM field name, labels `gpu, UUID, pci_bus_id, device, modelName`, then `GPU_I_PROFILE,
GPU_I_ID` on MIG instances, then the host label (`Hostname` as released up to 4.5.x, or
`hostname` after the 2026 rename: pick with `hostname_label`), then
`DCGM_FI_DRIVER_VERSION` and the Kubernetes attributes `container, namespace, pod`. Fields a
GPU cannot report carry DCGM's NOT_SUPPORTED sentinel (9223372036854775794) as the real
exporter prints them.

A MIG-enabled GPU has no row of its own: as in dcgm-3.x-a30mig-issue317.prom and
dcgm-4.x-a30mig-ada-pr736-2026.prom, every GPU instance gets a full row set with its own
GPU_I_PROFILE/GPU_I_ID and pod labels, in which the physical GPU's fields (power, energy,
temperatures, clocks, PCIe, ECC...) repeat, read a moment apart (power differs by ~0.1 W between
copies, counters by a few units), GPU_UTIL/MEM_COPY_UTIL print 0 (not measured per instance),
and only memory and the profiling ratios are the instance's own.

Values come from a FakeNvml (the same GPUs the nvml source sees), plus synthetic profiling
(DCP) fields, or from a fixed `body` (tests serve captured-format text with it).
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from ..sources.gpu import nvml_api as api
from .nvml_fake import FakeGpu, FakeHandle, FakeNvml

INT64_NOT_SUPPORTED = 0x7FFFFFFFFFFFFFF2
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# (field, type, help) in dcgm-exporter's default-counters.csv order, plus opt-in fields it ships.
FIELDS = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter",
     "Total number of NVLink bandwidth counters for all lanes."),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
     "Number of remapped rows for uncorrectable errors"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Throttling duration due to thermal constraints (in ns)."),
    ("DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints (in ns)."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
     "Ratio of cycles the device memory interface is active sending or receiving data."),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus - including both "
                                            "protocol headers and data payloads - in bytes per second."),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus - including both "
                                            "protocol headers and data payloads - in bytes per second."),
)
# What a MIG instance reports on its own; every other field is the physical GPU's, repeated.
MIG_FIELDS = {"DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
              "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE"}
# Per-GPU fields dcgm-exporter does not measure for an instance and prints as 0 there.
MIG_ZERO_FIELDS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL")
COUNTER_FIELDS = {name for name, type_, _ in FIELDS if type_ == "counter"}
MIB = 1 << 20


def _label_text(labels: list[tuple[str, str]]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in labels)


class GpuExposition:
    """Renders the fake GPUs as dcgm-exporter would."""

    def __init__(self, fake: FakeNvml, hostname: str = "gpu-node-01", hostname_label: str = "Hostname",
                 pods: dict[int | tuple[int, int], tuple[str, str, str]] | None = None) -> None:
        self.fake = fake
        self.hostname = hostname
        self.hostname_label = hostname_label
        # gpu index, or (gpu index, GPU instance id) for a MIG instance -> (container, namespace, pod)
        self.pods = pods or {}

    def render(self) -> str:
        rows: dict[str, list[str]] = {name: [] for name, _, _ in FIELDS}
        for gpu in self.fake.gpus:
            values = self._gpu_values(gpu)
            if values is None:  # a lost GPU drops out of dcgm-exporter's output
                continue
            if not gpu.migs:
                self._rows(rows, gpu, values, [], self.pods.get(gpu.index))
            for copy, mig in enumerate(gpu.migs):
                spec = mig.mig
                assert spec is not None  # FakeGpu.migs holds MIG handles only
                used = int(spec["memory_used"]) // MIB
                total = int(spec["memory_total"]) // MIB
                own = {
                    "DCGM_FI_DEV_FB_USED": used,
                    "DCGM_FI_DEV_FB_FREE": total - used,
                    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": round(used / max(1, total), 6),
                    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.21,
                    "DCGM_FI_PROF_DRAM_ACTIVE": 0.34,
                }
                instance = int(spec["gpu_instance"])
                self._rows(rows, gpu, {**self._physical_copy(values, copy, len(gpu.migs)), **own},
                           [("GPU_I_PROFILE", spec["profile"]), ("GPU_I_ID", str(instance))],
                           self.pods.get((gpu.index, instance)))
        out = []
        for name, type_, help_ in FIELDS:
            if rows[name]:
                out.append(f"# HELP {name} {help_}\n# TYPE {name} {type_}\n")
                out.extend(rows[name])
        return "".join(out)

    @staticmethod
    def _physical_copy(values: dict[str, float], copy: int, copies: int) -> dict[str, float]:
        """The physical fields as instance row `copy` prints them: read a moment apart, so gauges
        differ by a little (power by 0.11 W every other copy, as in the A30 capture) and counters
        are a few units behind for rows read earlier; GPU_UTIL/MEM_COPY_UTIL are 0 on instances."""
        out: dict[str, float] = {}
        for name, value in values.items():
            if name in MIG_FIELDS or value == INT64_NOT_SUPPORTED:
                out[name] = value
            elif name == "DCGM_FI_DEV_POWER_USAGE":
                out[name] = round(value + 0.11 * (copy // 2), 3)
            elif name in COUNTER_FIELDS and value:
                out[name] = value - 3 * (copies - 1 - copy)
            else:
                out[name] = value
        return {**out, **{name: 0 for name in MIG_ZERO_FIELDS}}

    def _rows(self, rows: dict[str, list[str]], gpu: FakeGpu, values: dict[str, float],
              mig_labels: list[tuple[str, str]],
              pod: tuple[str, str, str] | None) -> None:
        labels = [("gpu", str(gpu.index)), ("UUID", gpu.uuid), ("pci_bus_id", gpu.pci_bus_id),
                  ("device", f"nvidia{gpu.index}"), ("modelName", gpu.spec.get("name", "NVIDIA GPU"))]
        labels += mig_labels
        if self.hostname:
            labels.append((self.hostname_label, self.hostname))
        labels.append(("DCGM_FI_DRIVER_VERSION", str(self.fake.spec.get("driver_version", ""))))
        container, namespace, pod_name = pod or ("", "", "")
        labels += [("container", container), ("namespace", namespace), ("pod", pod_name)]
        text = _label_text(labels)
        for name, value in values.items():
            if name in rows:
                rows[name].append(f"{name}{{{text}}} {value}\n")

    def _gpu_values(self, gpu: FakeGpu) -> dict[str, float] | None:
        fake, h = self.fake, gpu.handle

        def read(call: Callable[[FakeHandle, int], int], arg: int, scale: float = 1.0) -> float:
            try:
                return call(h, arg) * scale
            except Exception as exc:
                if api.error_code(exc) == api.GPU_IS_LOST:
                    raise
                return INT64_NOT_SUPPORTED

        try:
            util = fake.utilization(h) if "utilization" not in gpu.not_supported else None
            mem = fake.memory_info(h)
            power_w = fake.power_usage(h) / 1000.0
            fields = {f.field_id: f for f in fake.field_values(h, [
                (api.FI_MEMORY_TEMP, 0), (api.FI_TOTAL_ENERGY, 0), (api.FI_PCIE_REPLAY, 0),
                (api.FI_REMAPPED_COR, 0), (api.FI_REMAPPED_UNC, 0), (api.FI_REMAPPED_FAILURE, 0),
                (api.FI_ECC_SBE_VOL, 0), (api.FI_ECC_DBE_VOL, 0)])}
            values: dict[str, float] = {
                "DCGM_FI_DEV_SM_CLOCK": read(fake.clock, api.CLOCK_SM),
                "DCGM_FI_DEV_MEM_CLOCK": read(fake.clock, api.CLOCK_MEM),
                "DCGM_FI_DEV_GPU_TEMP": read(fake.temperature, api.TEMPERATURE_GPU),
                "DCGM_FI_DEV_POWER_USAGE": round(power_w, 3),
                "DCGM_FI_DEV_ENC_UTIL": 0,
                "DCGM_FI_DEV_DEC_UTIL": 0,
                "DCGM_FI_DEV_XID_ERRORS": 0,
                "DCGM_FI_DEV_FB_USED": mem.used // MIB,
                "DCGM_FI_DEV_FB_RESERVED": (mem.reserved or 0) // MIB,
                "DCGM_FI_DEV_FB_FREE": (mem.total - mem.used - (mem.reserved or 0)) // MIB,
                "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": 0,
                "DCGM_FI_DEV_THERMAL_VIOLATION": 0,
                "DCGM_FI_DEV_POWER_VIOLATION": 0,
                "DCGM_FI_PROF_PCIE_TX_BYTES": read(fake.pcie_throughput, api.PCIE_TX, scale=1024),
                "DCGM_FI_PROF_PCIE_RX_BYTES": read(fake.pcie_throughput, api.PCIE_RX, scale=1024),
            }
        except Exception as exc:
            if api.error_code(exc) == api.GPU_IS_LOST:
                return None
            raise
        for fid, name in ((api.FI_MEMORY_TEMP, "DCGM_FI_DEV_MEMORY_TEMP"),
                          (api.FI_TOTAL_ENERGY, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"),
                          (api.FI_PCIE_REPLAY, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"),
                          (api.FI_REMAPPED_COR, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"),
                          (api.FI_REMAPPED_UNC, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"),
                          (api.FI_REMAPPED_FAILURE, "DCGM_FI_DEV_ROW_REMAP_FAILURE"),
                          (api.FI_ECC_SBE_VOL, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"),
                          (api.FI_ECC_DBE_VOL, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")):
            fv = fields[fid]
            values[name] = int(fv.value) if fv.ret == api.SUCCESS else INT64_NOT_SUPPORTED
        if util is not None:
            values["DCGM_FI_DEV_GPU_UTIL"] = util[0]
            values["DCGM_FI_DEV_MEM_COPY_UTIL"] = util[1]
            values["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] = round(util[0] / 100 * 0.97, 6)
            values["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"] = round(util[0] / 100 * 0.55, 6)
            values["DCGM_FI_PROF_DRAM_ACTIVE"] = round(util[1] / 100, 6)
        return values


class FakeDcgmExporter:
    """Serves GET /metrics on 127.0.0.1 (port 0 = any free port); `url` once started."""

    def __init__(self, exposition: GpuExposition | None = None, body: str | None = None,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self.exposition = exposition
        self.body = body
        self.host = host
        self.port = port
        self.requests = 0
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def _metrics(self, request: web.Request) -> web.Response:
        self.requests += 1
        if self.body is not None:
            text = self.body
        elif self.exposition is not None:
            text = self.exposition.render()
        else:
            raise RuntimeError("FakeDcgmExporter needs an exposition or a fixed body")
        return web.Response(text=text, headers={"Content-Type": CONTENT_TYPE})

    async def start(self) -> str:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        port = self._runner.addresses[0][1]  # the port actually bound (port 0 = any free one)
        self.url = f"http://{self.host}:{port}/metrics"
        return self.url

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
