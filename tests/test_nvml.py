"""The nvml source against the data-driven NVML fake: mapping and units, absence, lost GPUs, MIG,
throttling episodes, and the real nvidia-ml-py adapter where it can run without a GPU."""

from __future__ import annotations

import logging

import pynvml
import pytest
import yaml

from helpers import render_store, samples_of, value
from infrapulse.simulate.nvml_fake import FakeNvml
from infrapulse.simulate.scenarios import ScenarioBoard
from infrapulse.sources.gpu import nvml_api
from infrapulse.sources.gpu.nvml_api import FieldValue, InitError, RealNvml
from infrapulse.sources.gpu.nvml_poll import GpuPoller
from infrapulse.store import Store

H100 = {
    "name": "NVIDIA H100 80GB HBM3", "memory_total": 85520809984, "memory_reserved": 567279616,
    "power_limit_w": 700, "clock_sm_mhz": 1980, "clock_mem_mhz": 2619, "nvlinks": 4,
    "memory_repair": "row_remapping", "mig_slots": 7,
}
GPU0 = {
    "model": "H100", "uuid": "GPU-aaaa", "utilization": 87, "memory_utilization": 41,
    "memory_used": 61203283968, "power_w": 512.5, "temperature": 64, "memory_temperature": 71,
    "pstate": 2, "ecc": {"corrected_volatile": 3, "uncorrected_volatile": 1, "corrected_aggregate": 12,
                         "uncorrected_aggregate": 2},
    "remapped_rows": {"correctable": 4, "uncorrectable": 1, "pending": 1, "failure": 0},
    "pcie_replays": 5, "pcie_kbps": {"tx": 1000, "rx": 2000}, "nvlink_kibps": 100, "nvlink_down": [2],
    "energy_start_mj": 5000, "reasons": ["power_cap", "sw_thermal"],
}


def spec(*gpus, **extra) -> dict:
    return {"driver_version": "570.133.20", "cuda_driver_version": 12080, "models": {"H100": H100},
            "gpus": list(gpus), **extra}


class Clock:
    def __init__(self, t: float = 10.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def poll(fake: FakeNvml, poller: GpuPoller | None = None, xid_state=None):
    poller = poller or GpuPoller(fake)
    snap, errors = poller.poll(xid_state)
    store = Store()
    store.publish("nvml", "nvml", snap, 60)
    return render_store(store), errors, poller


def test_every_family_is_mapped_in_base_units():
    fake = FakeNvml(spec(GPU0), clock=Clock(10.0))
    values, errors, _ = poll(fake)
    assert errors == []
    g = {"gpu": "0", "uuid": "GPU-aaaa"}
    assert value(values, "infrapulse_gpu_info", **g, name="NVIDIA H100 80GB HBM3",
                 pci_bus_id="00000000:18:00.0", driver_version="570.133.20", cuda_version="12.8") == 1
    assert value(values, "infrapulse_gpu_healthy", **g) == 1
    assert value(values, "infrapulse_gpu_health_status_info", **g, reason="ok") == 1
    assert value(values, "infrapulse_gpu_utilization_ratio", **g) == pytest.approx(0.87)
    assert value(values, "infrapulse_gpu_memory_utilization_ratio", **g) == pytest.approx(0.41)
    assert value(values, "infrapulse_gpu_memory_used_bytes", **g) == 61203283968
    assert value(values, "infrapulse_gpu_memory_total_bytes", **g) == 85520809984
    assert value(values, "infrapulse_gpu_memory_reserved_bytes", **g) == 567279616
    assert value(values, "infrapulse_gpu_power_watts", **g) == pytest.approx(512.5)  # mW -> W
    assert value(values, "infrapulse_gpu_power_limit_watts", **g) == 700
    # mJ -> J: 5000 mJ at start + 512.5 W * 10 s
    assert value(values, "infrapulse_gpu_energy_joules_total", **g) == pytest.approx(5.0 + 5125.0)
    assert value(values, "infrapulse_gpu_temperature_celsius", **g, sensor="gpu") == 64
    assert value(values, "infrapulse_gpu_temperature_celsius", **g, sensor="memory") == 71
    assert value(values, "infrapulse_gpu_clock_hertz", **g, clock="sm") == 1980e6  # MHz -> Hz
    assert value(values, "infrapulse_gpu_clock_hertz", **g, clock="memory") == 2619e6
    events = {dict(k)["reason"]: v
              for k, v in samples_of(values, "infrapulse_gpu_clock_event_active").items()}
    assert events == {"gpu_idle": 0, "clocks_setting": 0, "power_cap": 1, "hw_slowdown": 0, "sync_boost": 0,
                      "sw_thermal": 1, "hw_thermal": 0, "hw_power_brake": 0, "display_clocks": 0}
    assert value(values, "infrapulse_gpu_performance_state", **g) == 2
    ecc = {(dict(k)["type"], dict(k)["scope"]): v
           for k, v in samples_of(values, "infrapulse_gpu_ecc_errors_total").items()}
    assert ecc == {("corrected", "volatile"): 3, ("uncorrected", "volatile"): 1,
                   ("corrected", "aggregate"): 12, ("uncorrected", "aggregate"): 2}
    assert value(values, "infrapulse_gpu_remapped_rows_total", **g, type="correctable") == 4
    assert value(values, "infrapulse_gpu_remapped_rows_total", **g, type="uncorrectable") == 1
    assert value(values, "infrapulse_gpu_row_remap_pending", **g) == 1
    assert value(values, "infrapulse_gpu_row_remap_failure", **g) == 0
    assert value(values, "infrapulse_gpu_pcie_replays_total", **g) == 5
    assert value(values, "infrapulse_gpu_pcie_throughput_bytes_per_second", **g,
                 direction="tx") == 1000 * 1024
    assert value(values, "infrapulse_gpu_pcie_throughput_bytes_per_second", **g,
                 direction="rx") == 2000 * 1024
    up = {dict(k)["link"]: v for k, v in samples_of(values, "infrapulse_gpu_nvlink_up").items()}
    assert up == {"0": 1, "1": 1, "2": 0, "3": 1}
    # KiB -> bytes: 100 KiB/s for 10 s on an up link; a down link carries nothing
    assert value(values, "infrapulse_gpu_nvlink_transmitted_bytes_total", **g, link="0") == 1000 * 1024
    assert value(values, "infrapulse_gpu_nvlink_received_bytes_total", **g, link="3") == 1000 * 1024
    assert value(values, "infrapulse_gpu_nvlink_received_bytes_total", **g, link="2") == 0
    assert value(values, "infrapulse_gpu_mig_enabled", **g) == 0
    # row remapping GPU: no retired-pages series at all (not zeros)
    assert samples_of(values, "infrapulse_gpu_retired_pages_total") == {}
    assert samples_of(values, "infrapulse_gpu_retired_pages_pending") == {}


def test_retired_pages_on_a_gpu_without_row_remapping():
    v100 = {**GPU0, "memory_repair": "page_retirement",
            "retired_pages": {"single_bit_ecc": 2, "double_bit_ecc": 1, "pending": 1}}
    values, _, _ = poll(FakeNvml(spec(v100), clock=Clock()))
    g = {"gpu": "0", "uuid": "GPU-aaaa"}
    assert value(values, "infrapulse_gpu_retired_pages_total", **g, cause="single_bit_ecc") == 2
    assert value(values, "infrapulse_gpu_retired_pages_total", **g, cause="double_bit_ecc") == 1
    assert value(values, "infrapulse_gpu_retired_pages_pending", **g) == 1
    assert samples_of(values, "infrapulse_gpu_remapped_rows_total") == {}
    assert samples_of(values, "infrapulse_gpu_row_remap_pending") == {}


def test_not_supported_is_absent_logged_once_and_not_asked_again(caplog):
    gpu = {**GPU0, "not_supported": ["memory_temperature", "power", "utilization", "memory_reserved", "ecc"]}
    fake = FakeNvml(spec(gpu), clock=Clock())
    caplog.set_level(logging.INFO, logger="infrapulse.source.nvml")
    values, errors, poller = poll(fake)
    assert errors == []
    g = {"gpu": "0", "uuid": "GPU-aaaa"}
    assert ("infrapulse_gpu_temperature_celsius", frozenset({**g, "sensor": "memory"}.items())) not in values
    assert value(values, "infrapulse_gpu_temperature_celsius", **g, sensor="gpu") == 64
    for family in ("infrapulse_gpu_power_watts", "infrapulse_gpu_utilization_ratio",
                   "infrapulse_gpu_memory_utilization_ratio", "infrapulse_gpu_memory_reserved_bytes",
                   "infrapulse_gpu_ecc_errors_total"):
        assert samples_of(values, family) == {}, family
    assert value(values, "infrapulse_gpu_memory_used_bytes", **g) == 61203283968
    absent_logs = [r for r in caplog.records if "left out" in r.getMessage()]
    assert len(absent_logs) == 1 and "power_usage (NotSupported)" in absent_logs[0].values
    assert "field memory_temperature (NotSupported)" in absent_logs[0].values
    before = dict(fake.calls)
    poller.poll()
    assert fake.calls["power_usage"] == before["power_usage"]  # never asked again
    assert fake.calls["utilization"] == before["utilization"]
    assert fake.calls["field_values"] == before["field_values"] + 1
    assert len([r for r in caplog.records if "left out" in r.getMessage()]) == 1


def test_a_lost_gpu_is_unhealthy_with_reason_and_the_others_still_report():
    other = {**GPU0, "uuid": "GPU-bbbb"}
    fake = FakeNvml(spec(GPU0, other), clock=Clock())
    poller = GpuPoller(fake)
    poller.poll()
    fake.set_lost(0)
    values, errors, _ = poll(fake, poller)
    lost = {"gpu": "0", "uuid": "GPU-aaaa"}
    ok = {"gpu": "1", "uuid": "GPU-bbbb"}
    assert value(values, "infrapulse_gpu_healthy", **lost) == 0
    assert value(values, "infrapulse_gpu_health_status_info", **lost, reason="gpu_is_lost") == 1
    assert value(values, "infrapulse_gpu_info", **lost, name="NVIDIA H100 80GB HBM3",
                 pci_bus_id="00000000:18:00.0", driver_version="570.133.20", cuda_version="12.8") == 1
    assert ("infrapulse_gpu_power_watts", frozenset(lost.items())) not in values
    assert value(values, "infrapulse_gpu_healthy", **ok) == 1
    assert value(values, "infrapulse_gpu_power_watts", **ok) == pytest.approx(512.5)
    assert len(errors) == 1 and errors[0].startswith("gpu 0: gpu_is_lost")
    # lost at enumeration time (after a rescan) too: identity kept from before
    poller.enumerate()
    values, _, _ = poll(fake, poller)
    assert value(values, "infrapulse_gpu_healthy", **lost) == 0
    fake.set_lost(0, False)
    values, _, _ = poll(fake, poller)
    assert value(values, "infrapulse_gpu_healthy", **lost) == 1


def test_reset_required_in_a_field_value_marks_the_gpu_sick():
    fake = FakeNvml(spec(GPU0), clock=Clock())
    original = fake._field

    def field(gpu, fid, scope, now, answers):
        if fid == nvml_api.FI_PCIE_REPLAY:
            return FieldValue(fid, scope, nvml_api.RESET_REQUIRED, 0.0)
        return original(gpu, fid, scope, now, answers)

    fake._field = field
    values, errors, _ = poll(fake)
    assert value(values, "infrapulse_gpu_healthy", gpu="0", uuid="GPU-aaaa") == 0
    assert value(values, "infrapulse_gpu_health_status_info", gpu="0", uuid="GPU-aaaa",
                 reason="reset_required") == 1
    assert samples_of(values, "infrapulse_gpu_utilization_ratio") == {}  # nothing half-read is kept


def test_mig_instances_are_labelled_and_report_their_memory():
    gpu = {**GPU0, "mig": [{"gpu_instance": 1, "profile": "3g.40gb", "memory_total": 42144366592,
                            "memory_used": 21474836480},
                           {"gpu_instance": 5, "profile": "1g.10gb", "memory_total": 10468982784,
                            "memory_used": 2147483648}]}
    values, errors, _ = poll(FakeNvml(spec(gpu), clock=Clock()))
    assert errors == []
    g = {"gpu": "0", "uuid": "GPU-aaaa"}
    assert value(values, "infrapulse_gpu_mig_enabled", **g) == 1
    assert value(values, "infrapulse_gpu_memory_used_bytes", **g, gpu_instance="1",
                 mig_profile="3g.40gb") == 21474836480
    assert value(values, "infrapulse_gpu_memory_total_bytes", **g, gpu_instance="5",
                 mig_profile="1g.10gb") == 10468982784
    infos = [dict(k) for k in samples_of(values, "infrapulse_gpu_info")]
    mig_info = [i for i in infos if i.get("gpu_instance") == "1"][0]
    assert mig_info["name"] == "NVIDIA H100 80GB HBM3 MIG 3g.40gb" and mig_info["mig_uuid"].startswith("MIG-")
    # physical-GPU values stay unlabelled; utilization is not available in MIG mode
    assert value(values, "infrapulse_gpu_memory_used_bytes", **g) == 61203283968
    assert samples_of(values, "infrapulse_gpu_utilization_ratio") == {}
    assert value(values, "infrapulse_gpu_power_watts", **g) == pytest.approx(512.5)


def test_throttle_episode_and_thermal_scenario_follow_the_clock():
    gpu = {**GPU0, "reasons": [],
           "episodes": [{"from": 100, "to": 200, "reasons": ["power_cap"], "power_w": 700,
                         "clock_sm_mhz": 1500}]}
    clock = Clock(50.0)
    board = ScenarioBoard()
    fake = FakeNvml(spec(gpu, scenarios={"gpu-thermal": {"gpu": 0, "reasons": ["hw_thermal", "hw_slowdown"],
                                                         "temperature": 93}}),
                    clock=clock, scenarios=board)
    poller = GpuPoller(fake)

    def active(values):
        return {dict(k)["reason"] for k, v in samples_of(values, "infrapulse_gpu_clock_event_active").items()
                if v == 1}

    values, _, _ = poll(fake, poller)
    assert active(values) == set()
    clock.t = 150.0
    values, _, _ = poll(fake, poller)
    assert active(values) == {"power_cap"}
    assert value(values, "infrapulse_gpu_power_watts", gpu="0", uuid="GPU-aaaa") == 700
    assert value(values, "infrapulse_gpu_clock_hertz", gpu="0", uuid="GPU-aaaa", clock="sm") == 1500e6
    clock.t = 250.0
    board.activate("gpu-thermal")
    values, _, _ = poll(fake, poller)
    assert active(values) == {"hw_thermal", "hw_slowdown"}
    assert value(values, "infrapulse_gpu_temperature_celsius", gpu="0", uuid="GPU-aaaa", sensor="gpu") == 93


def test_one_batched_field_call_per_gpu_whatever_the_link_count():
    fake = FakeNvml(spec({**GPU0, "count": 8}, models={"H100": {**H100, "nvlinks": 18}}), clock=Clock())
    poller = GpuPoller(fake)
    poller.poll()
    fake.calls.clear()
    snap, _ = poller.poll()
    assert fake.calls["field_values"] == 8
    assert fake.nvml_calls() == 8 * 12
    assert len(snap.series["infrapulse_gpu_nvlink_up"]) == 8 * 18


def test_old_driver_without_the_nvlink_state_field_falls_back_to_per_link_calls():
    gpu = {**GPU0, "not_supported": ["nvlink_state_field"]}
    fake = FakeNvml(spec(gpu), clock=Clock())
    poller = GpuPoller(fake)
    values, _, _ = poll(fake, poller)
    values, _, _ = poll(fake, poller)  # the second poll no longer asks for the state field
    up = {dict(k)["link"]: v for k, v in samples_of(values, "infrapulse_gpu_nvlink_up").items()}
    assert up == {"0": 1, "1": 1, "2": 0, "3": 1}
    assert fake.calls["nvlink_state"] == 4 * 2  # 4 links, both polls
    assert all(f != nvml_api.FI_NVLINK_STATE for f, _ in poller.gpus[0].fields)


def test_the_shipped_demo_data_loads_and_covers_h100_h200_a100():
    from infrapulse.simulate.nvml_fake import DEFAULT_DATA

    data = yaml.safe_load(DEFAULT_DATA.read_text())
    assert {"H100", "H200", "A100"} <= set(data["models"])
    fake = FakeNvml(data, clock=Clock(1.0))
    values, errors, _ = poll(fake)
    assert errors == []
    names = {dict(k)["name"] for k in samples_of(values, "infrapulse_gpu_info")}
    assert {"NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-40GB"} <= names
    # every GPU is healthy: a GPU falls off the bus only in the `xid` scenario
    assert sum(samples_of(values, "infrapulse_gpu_healthy").values()) == len(fake.gpus)


# -- the real nvidia-ml-py adapter, without a GPU ---------------------------------------------

def test_real_nvml_without_the_library_reports_no_nvml(monkeypatch):
    monkeypatch.setattr(pynvml, "nvmlLib", None)

    def no_library(*args, **kwargs):
        raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    monkeypatch.setattr(pynvml, "CDLL", no_library)
    with pytest.raises(InitError) as err:
        RealNvml().init()
    assert err.value.reason == "no_nvml"
    assert "NVML Shared Library Not Found" in err.value.message


def test_real_field_value_conversion_reads_the_union_member_of_its_type():
    raw = (pynvml.c_nvmlFieldValue_t * 3)()
    raw[0].fieldId, raw[0].valueType, raw[0].nvmlReturn = 83, pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, 0
    raw[0].value.ullVal = 2**40 + 7
    raw[1].fieldId, raw[1].valueType, raw[1].nvmlReturn = 82, pynvml.NVML_VALUE_TYPE_DOUBLE, 0
    raw[1].value.dVal = 71.5
    raw[2].fieldId, raw[2].scopeId, raw[2].nvmlReturn = 138, 3, pynvml.NVML_ERROR_NOT_SUPPORTED

    class Lib:
        def nvmlDeviceGetFieldValues(self, handle, fields):
            assert fields == [(83, 0), (82, 0), (138, 3)]
            return raw

    real = RealNvml()
    real._nvml = Lib()
    out = real.field_values(object(), [(83, 0), (82, 0), (138, 3)])
    assert out == [FieldValue(83, 0, 0, float(2**40 + 7)), FieldValue(82, 0, 0, 71.5),
                   FieldValue(138, 3, nvml_api.NOT_SUPPORTED, 0.0)]


def test_error_classification_matches_the_reference_taxonomy():
    absent = ["NotSupported", "NoPermission", "NotFound", "FunctionNotFound", "NoData", "InvalidArgument",
              "Deprecated", "ArgumentVersionMismatch", "VgpuEccNotSupported"]
    for name in absent:
        assert nvml_api.classify(getattr(pynvml, f"NVMLError_{name}")()) == nvml_api.ABSENT, name
    for name in ("GpuIsLost", "ResetRequired", "Unknown"):
        assert nvml_api.classify(getattr(pynvml, f"NVMLError_{name}")()) == nvml_api.SICK, name
    assert nvml_api.classify(pynvml.NVMLError_Timeout()) == nvml_api.ERROR
    assert nvml_api.classify(ValueError("x")) == nvml_api.ERROR
    assert not nvml_api.is_permanent_absence(nvml_api.NOT_FOUND)
    assert nvml_api.is_permanent_absence(nvml_api.NOT_SUPPORTED)


def test_real_adapter_falls_back_to_the_deprecated_call_on_old_drivers():
    class OldDriver:
        NVMLError = pynvml.NVMLError
        calls = []

        def nvmlDeviceGetTemperatureV(self, h, sensor):
            self.calls.append("TemperatureV")
            raise pynvml.NVMLError_FunctionNotFound()

        def nvmlDeviceGetTemperature(self, h, sensor):
            self.calls.append("Temperature")
            return 61

        def nvmlDeviceGetCurrentClocksEventReasons(self, h):
            raise pynvml.NVMLError_GpuIsLost()  # other errors are not a reason to fall back

    real = RealNvml()
    real._nvml = lib = OldDriver()
    assert real.temperature(object(), 0) == 61
    assert real.temperature(object(), 0) == 61
    assert lib.calls == ["TemperatureV", "Temperature", "Temperature"]  # the missing symbol is not retried
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        real.clocks_event_reasons(object())


def test_the_demo_data_scripts_nothing_in_time():
    """Issue 32: the demo paged the ML team an hour in from a scripted `lost_at`, raised XID 13 at
    90 s and capped GPU 0's power every 600 s, with no scenario shown active. Each is a scenario
    now (listed, off unless asked for): the demo data times nothing."""
    from infrapulse.simulate.nvml_fake import DEFAULT_DATA

    data = yaml.safe_load(DEFAULT_DATA.read_text())
    scripted = ("lost_at", "xids", "episodes")
    assert [(i, k) for i, g in enumerate(data["gpus"]) for k in scripted if k in g] == []
    fake = FakeNvml(data, clock=Clock(7200.0))
    poller = GpuPoller(fake)
    values, errors, _ = poll(fake, poller)
    assert errors == []  # two hours in, every GPU still answers
    assert samples_of(values, "infrapulse_gpu_xid_errors_total") == {}
    capped = {dict(k)["gpu"] for k, v in samples_of(values, "infrapulse_gpu_clock_event_active").items()
              if v == 1 and dict(k)["reason"] == "power_cap"}
    assert capped == set()


def test_the_demo_scenarios_that_were_scripted_events():
    """xid-app-error raises XID 13 on GPU 5 once per start; gpu-power-cap caps GPU 0 while active."""
    from infrapulse.simulate.nvml_fake import DEFAULT_DATA, SCENARIOS

    assert {"xid-app-error", "gpu-power-cap"} <= set(SCENARIOS)
    data = yaml.safe_load(DEFAULT_DATA.read_text())
    board = ScenarioBoard()
    fake = FakeNvml(data, clock=Clock(10.0), scenarios=board)
    event_set = fake.event_set_create()
    for h in range(fake.device_count()):
        fake.register_xid_events(fake.gpus[h].handle, event_set)
    board.activate("xid-app-error")
    board.activate("gpu-power-cap")
    values, errors, _ = poll(fake)
    assert errors == []
    events = []
    while (event := fake.event_set_wait(event_set, 0)) is not None:
        events.append((event.device.index, event.xid))
    assert events == [(5, 13)]
    capped = {dict(k)["gpu"] for k, v in samples_of(values, "infrapulse_gpu_clock_event_active").items()
              if v == 1 and dict(k)["reason"] == "power_cap"}
    assert capped == {"0"}
    assert value(values, "infrapulse_gpu_power_watts", gpu="0", uuid=fake.gpus[0].uuid) == 700
    board.deactivate("gpu-power-cap")
    values, _, _ = poll(fake)
    assert value(values, "infrapulse_gpu_clock_event_active", gpu="0", uuid=fake.gpus[0].uuid,
                 reason="power_cap") == 0


# -- NVLink data-link errors and the NVSwitch fabric (issue 34) --------------------------------

def test_nvlink_error_counters_per_link_and_type():
    gpu = {**GPU0, "nvlink_errors": [{"link": 1, "replay": 3.0, "recovery": 0.2, "crc": 1.5}]}
    values, errors, _ = poll(FakeNvml(spec(gpu), clock=Clock(10.0)))
    assert errors == []
    g = {"gpu": "0", "uuid": "GPU-aaaa"}
    got = {(dict(k)["link"], dict(k)["type"]): v
           for k, v in samples_of(values, "infrapulse_gpu_nvlink_errors_total").items()}
    assert got[("1", "replay")] == 30 and got[("1", "recovery")] == 2 and got[("1", "crc")] == 15
    assert got[("0", "crc")] == 0 and len(got) == 4 * 3  # every link, every type
    assert value(values, "infrapulse_gpu_nvlink_errors_total", **g, link="3", type="recovery") == 0


def test_a_driver_without_the_error_fields_leaves_them_out_and_keeps_the_rest():
    gpu = {**GPU0, "not_supported": ["nvlink_errors"]}
    values, errors, _ = poll(FakeNvml(spec(gpu), clock=Clock(10.0)))
    assert errors == []
    assert samples_of(values, "infrapulse_gpu_nvlink_errors_total") == {}
    assert len(samples_of(values, "infrapulse_gpu_nvlink_up")) == 4


@pytest.mark.parametrize("fabric, expected", [
    ({"state": "completed", "status": 0, "clique": 7}, ("completed", "0", "7")),
    ({"state": "in_progress", "status": 0, "clique": 0}, ("in_progress", "0", "0")),
    ({"state": "completed", "status": 999, "clique": 0}, ("completed", "999", "0")),  # NVML_ERROR_UNKNOWN
])
def test_fabric_state_on_nvswitch_systems(fabric, expected):
    values, errors, _ = poll(FakeNvml(spec({**GPU0, "fabric": fabric}), clock=Clock()))
    assert errors == []
    got = samples_of(values, "infrapulse_gpu_fabric_state")
    assert [(dict(k)["state"], dict(k)["status"], dict(k)["clique"]) for k in got] == [expected]


def test_no_fabric_series_without_nvswitch():
    values, _, _ = poll(FakeNvml(spec(GPU0), clock=Clock()))
    assert samples_of(values, "infrapulse_gpu_fabric_state") == {}
