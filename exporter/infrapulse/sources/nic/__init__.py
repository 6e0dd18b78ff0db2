"""NIC telemetry on a node: RDMA ports (/sys/class/infiniband) and NIC driver statistics
(the ethtool ioctl: per-priority PFC, pause, PHY and buffer counters). Both sources' metric
families are declared in `families.py`.

Imports: `..base` and the top-level plumbing only.
"""
