"""GPU: utilisation, memory, power, temperature, throttling, XIDs, ECC, NVLink and PCIe."""

from __future__ import annotations

from grafana import Dashboard, alert_annotation, query_variable, row, stat, table, target, timeseries
from promql import SCOPE, by, increase, rate, sel

UID = "infrapulse-gpu"

GPU = {**SCOPE, "gpu": "$gpu"}
PER_GPU = "instance, gpu"
LEGEND = "{{instance}} gpu{{gpu}}"


def g(metric: str, **extra: str) -> str:
    return sel(metric, GPU, **extra)


def build() -> Dashboard:
    panels = [
        row("Fleet"),
        stat("GPUs healthy",
             "GPUs that NVML reports as reachable and healthy.",
             [target(f"sum({g('infrapulse_gpu_healthy')})")], "none"),
        stat("GPUs unhealthy",
             "GPUs lost, needing a reset, or otherwise reported unhealthy.",
             [target(f"count({g('infrapulse_gpu_healthy')} == 0) or vector(0)")], "none",
             steps=[{"color": "green", "value": None}, {"color": "red", "value": 1}]),
        stat("XID errors (1h)",
             "XID errors reported by the driver over the last hour on the selected GPUs.",
             [target(f"sum({increase(g('infrapulse_gpu_xid_errors_total'), '1h')}) or vector(0)")], "short",
             steps=[{"color": "green", "value": None}, {"color": "red", "value": 1}]),
        stat("Mean GPU utilisation",
             "Mean utilisation over the selected GPUs (share of time a kernel was running).",
             [target(f"avg({g('infrapulse_gpu_utilization_ratio')})")], "percentunit", min=0, max=1),
        table("GPU inventory",
              "Model, UUID, PCI bus id, driver and CUDA version of each GPU.",
              [target(g("infrapulse_gpu_info"), instant=True, table=True)],
              hide=("Time", "__name__", "Value"), width=24, height=6),
        row("Utilisation and memory"),
        timeseries("GPU utilisation",
                   "Share of time one or more kernels ran, per GPU. Low utilisation while serving "
                   "requests queue points at a stall outside the GPU (input, network, KV transfer).",
                   [target(g("infrapulse_gpu_utilization_ratio"), LEGEND)], "percentunit", min=0, max=1),
        timeseries("Memory bandwidth utilisation",
                   "Share of time device memory was read or written, per GPU.",
                   [target(g("infrapulse_gpu_memory_utilization_ratio"), LEGEND)],
                   "percentunit", min=0, max=1),
        timeseries("Memory used",
                   "Framebuffer memory used per GPU, against the GPU's total memory.",
                   [target(g("infrapulse_gpu_memory_used_bytes"), f"used {LEGEND}"),
                    target(by(PER_GPU, g("infrapulse_gpu_memory_total_bytes"), "max"), f"total {LEGEND}")],
                   "bytes", min=0),
        timeseries("Clocks",
                   "SM and memory clocks per GPU; a drop with high utilisation means throttling.",
                   [target(g("infrapulse_gpu_clock_hertz"), "{{instance}} gpu{{gpu}} {{clock}}")],
                   "hertz", min=0),
        row("Power, temperature and throttling"),
        timeseries("Power",
                   "Power draw per GPU, from the instantaneous reading and from the energy counter's rate "
                   "(the latter averages over the rate window).",
                   [target(g("infrapulse_gpu_power_watts"), f"reading {LEGEND}"),
                    target(by(PER_GPU, rate(g("infrapulse_gpu_energy_joules_total"))),
                           f"from energy {LEGEND}")],
                   "watt", min=0),
        timeseries("Temperature",
                   "GPU and memory temperature per GPU.",
                   [target(g("infrapulse_gpu_temperature_celsius"), "{{instance}} gpu{{gpu}} {{sensor}}")],
                   "celsius", min=0),
        timeseries("Clock event (throttle) reasons",
                   "Active clock-event reasons per GPU: HW slowdown, thermal and power-brake throttling "
                   "cost performance; idle and application clocks are benign.",
                   [target(by("instance, gpu, reason", g("infrapulse_gpu_clock_event_active"), "max"),
                           "{{instance}} gpu{{gpu}} {{reason}}")], "bool", min=0, max=1),
        timeseries("GPU healthy",
                   "GPU health flag (1 healthy) per GPU; 0 means lost or reset required.",
                   [target(g("infrapulse_gpu_healthy"), LEGEND)], "bool", min=0, max=1),
        row("Errors"),
        timeseries("XID errors",
                   "XID errors per GPU and XID code over the last 10 minutes (recording rule). Critical "
                   "codes (docs/health.md, XID classes) need a GPU reset or a reboot.",
                   [target(by("instance, gpu, xid",
                              g("instance_gpu_xid:infrapulse_gpu_xid_errors:increase10m")),
                           "{{instance}} gpu{{gpu}} xid {{xid}}")], "short", min=0),
        timeseries("Last XID",
                   "The most recent XID code per GPU (0: none since the exporter started).",
                   [target(g("infrapulse_gpu_last_xid"), LEGEND)], "none", min=0),
        timeseries("ECC errors",
                   "Corrected and uncorrected ECC errors per GPU over the last 10 minutes; any "
                   "uncorrected error is critical.",
                   [target(by("instance, gpu, type, scope",
                              increase(g("infrapulse_gpu_ecc_errors_total"), "10m")),
                           "{{instance}} gpu{{gpu}} {{type}} {{scope}}")], "short", min=0),
        timeseries("Row remapping",
                   "Rows pending remap (a reset applies them) and remap failures (the GPU needs service).",
                   [target(g("infrapulse_gpu_row_remap_pending"), f"pending {LEGEND}"),
                    target(g("infrapulse_gpu_row_remap_failure"), f"failure {LEGEND}")],
                   "bool", min=0, max=1),
        row("Interconnect"),
        timeseries("NVLink throughput",
                   "Bytes per second transmitted and received over NVLink per GPU (all links).",
                   [target(by(PER_GPU, rate(g("infrapulse_gpu_nvlink_transmitted_bytes_total"))),
                           f"tx {LEGEND}"),
                    target(by(PER_GPU, rate(g("infrapulse_gpu_nvlink_received_bytes_total"))),
                           f"rx {LEGEND}")],
                   "Bps", min=0),
        timeseries("NVLink links up",
                   "NVLink links up per GPU.",
                   [target(by(PER_GPU, g("infrapulse_gpu_nvlink_up")), LEGEND)], "none", min=0),
        timeseries("PCIe replays",
                   "PCIe replay events per second per GPU: a rising rate means a marginal PCIe link.",
                   [target(by(PER_GPU, rate(g("infrapulse_gpu_pcie_replays_total"))), LEGEND)], "cps", min=0),
        row("Kernel log"),
        timeseries("Kernel log events",
                   "Driver events in the kernel log (kmsg source) over the last 10 minutes, per PCI "
                   "function: Xid, SXid, GPU fallen off the bus, mlx5 health and timeouts, link and "
                   "module events, PCIe AER (docs/kmsg.md). Not filtered by $gpu: the kernel names "
                   "PCI addresses.",
                   [target(by("instance, kind, pci_address, code",
                              increase(sel("infrapulse_kmsg_events_total", SCOPE), "10m")),
                           "{{instance}} {{pci_address}} {{kind}} {{code}}")], "short", min=0),
        timeseries("Kernel log overruns",
                   "Kernel log records lost before infrapulse read them (/dev/kmsg EPIPE), per 10 minutes.",
                   [target(by("instance", increase(sel("infrapulse_kmsg_overruns_total", SCOPE), "10m")),
                           "{{instance}}")], "short", min=0),
    ]
    return Dashboard(
        uid=UID, title="infrapulse / GPU",
        description="GPU state from NVML or DCGM: utilisation, memory, power, temperature, throttling, "
                    "XIDs, ECC, row remapping, NVLink and PCIe.",
        tags=["gpu", "ml"],
        variables=[
            query_variable("job", "label_values(infrapulse_build_info, job)"),
            query_variable("instance", 'label_values(infrapulse_build_info{job=~"$job"}, instance)'),
            query_variable("gpu", 'label_values(infrapulse_gpu_info{job=~"$job", instance=~"$instance"}, '
                                  'gpu)',
                           label="GPU"),
        ],
        panels=panels,
        annotations=[alert_annotation("GPU alerts", 'ALERTS{alertstate="firing", team="ml", gpu!=""}',
                                      "red")],
    )
