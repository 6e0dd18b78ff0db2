"""Families of the `kmsg` source: kernel-log events counted per PCI function, by kind (one
vocabulary, classify.py), and the reader's own counters. `pci_address` is the sysfs form
(0000:b3:00.0) that the kernel prints; infrapulse_gpu_info's `pci_bus_id` is NVML's
(00000000:B3:00.0), hence another label name."""

from __future__ import annotations

from ... import catalog

SRC = "kmsg"

EVENTS = catalog.declare(
    "infrapulse_kmsg_events_total", catalog.COUNTER,
    "Kernel log events read since infrapulse started (records before a restart are not read again: "
    "the cursor), one per log line, by kind (xid, sxid, gpu_fallen_off_bus, mlx5_health_compromised, "
    "mlx5_fw_error, mlx5_cmd_timeout, cqe_error, tx_timeout, link_up, link_down, link_init, "
    "module_plugged, module_unplugged, module_error, pcie_aer, bnxt_error) and the PCI function the "
    "line names (\"\" where it names none). code: the XID or SXid number, the AER error type "
    "(physical_layer, data_link_layer, transaction_layer); severity: the XID class (critical, "
    "application, other), the AER severity (corrected, uncorrected_nonfatal, uncorrected_fatal), "
    "the mlx5 health severity, the SXid line's fatal / non_fatal; \"\" where none applies.",
    ("kind", "pci_address", "code", "severity"), source=SRC)
LAST_EVENT = catalog.declare(
    "infrapulse_kmsg_last_event_info", catalog.INFO,
    "1 for the last kernel-log event of each PCI function: its kind, code and a fixed summary of "
    "that kind (at most 80 characters, never log text).",
    ("pci_address", "kind", "code", "summary"), source=SRC)
LAST_EVENT_TIME = catalog.declare(
    "infrapulse_kmsg_last_event_timestamp_seconds", catalog.GAUGE,
    "When infrapulse read the last kernel-log event of each PCI function (Unix time).",
    ("pci_address",), unit="seconds", source=SRC)
RECORDS = catalog.declare(
    "infrapulse_kmsg_records_total", catalog.COUNTER,
    "Kernel log records read (each counted once across restarts; those at or below the cursor are "
    "skipped).", (), source=SRC)
OVERRUNS = catalog.declare(
    "infrapulse_kmsg_overruns_total", catalog.COUNTER,
    "Times /dev/kmsg reported EPIPE: the kernel ring buffer overwrote records before infrapulse read "
    "them (events were lost; raise the read rate or max_records_per_cycle).", (), source=SRC)
CURSOR_RESETS = catalog.declare(
    "infrapulse_kmsg_cursor_resets_total", catalog.COUNTER,
    "Times the record sequence went backwards (a new log under a running reader) and the cursor "
    "started over.", (), source=SRC)
