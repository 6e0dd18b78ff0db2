"""NIC telemetry on a node: RDMA ports (/sys/class/infiniband) and NIC driver statistics
(the ethtool ioctl: per-priority PFC, pause, PHY and buffer counters).

Imports: `..base` and the top-level plumbing only.
"""
