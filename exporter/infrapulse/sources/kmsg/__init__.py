"""Kernel log: the driver lines a GPU/RDMA node's faults first show up in (NVRM Xid and
fallen-off-the-bus, NVSwitch SXid, mlx5 health/command timeouts/TX timeouts/link and module
events, PCIe AER, bnxt), read from /dev/kmsg and counted per PCI device (docs/kmsg.md).

Owns: the kernel-log line forms (records.py), the event vocabulary (classify.py), reading and
following /dev/kmsg with a persisted cursor (reader.py).

Imports: `..base`, the top-level plumbing (`schema`, `store`, `catalog`) and `infrapulse.xid`
(the one XID table) only.
"""
