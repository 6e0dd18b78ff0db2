"""Active probes from the workload's side: the always-on latency mesh (nccl-tests, perftest and
baselines are to come beside it).

Owns: `mesh` (the `mesh` source: a UDP responder and prober between the nodes' RDMA netdev
addresses), `mesh_wire` (the probe packet and the rate-limited responder), `mesh_peers` (peer
lists, grouping by switch, the bounded peer selection, local addresses) and `mesh_families`.

Imports: `..base` and the top-level plumbing (`schema`, `store`, `catalog`) and its own modules.
Never `simulate`, `health`, `daemon` or `cli`, nor another source's package (other sources'
series are read from the store by family name).
"""
