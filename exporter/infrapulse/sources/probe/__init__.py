"""Active probes from the workload's side: nccl-tests and perftest runs, result files dropped by
jobs, per-size baselines with verdicts persisted under the daemon's `state_dir`, and the
always-on latency mesh.

  nccl.py, perftest.py   parsers of every output format of the two tools (text tables of every
                         version, JSON), pure functions over text
  results.py             what the parsers return
  families.py            the `infrapulse_probe_*` families of the probe source
  versions.py            what a run ran under (NIC firmware, drivers, NCCL, config hashes)
  idle.py                whether the node may be probed now (GPU processes, serving, flag file)
  runner.py              one probe process: lock, lowered priority, hard timeout on its group
  baseline.py            the baseline and verdict rules: observations of a result, judged
  state.py               the state file under `<state_dir>/probe/`: atomic writes, trimming
  inbox.py               result files written by Kubernetes Jobs or Slurm steps: found, read
  source.py              the `probe` source, a coordinator: each check, the run task, statuses,
                         saving and publishing; what it drives:
    probe_set.py         which probes the config names, built afresh for each run
    schedule.py          when a run is due: the interval, version changes (sysfs or a run's NCCL)
    scratch.py           one probe of a run in a scratch directory, removed after
    attempts.py          what an attempt leaves in the state: counts, last run, kept output
    verdicts.py          tracked metrics judged into the state; the accept-baseline flag
    inbox_ingest.py      inbox files into the state, each once
    snapshot.py          the exported series, from the state alone
  peer.py, peer_server.py  perftest against a peer node: the client asks the peer's daemon for a
                         server; the peer's authenticated POST /api/v1/probes/perftest-server
  mesh.py                the `mesh` source: a UDP responder and prober between the nodes' RDMA
                         netdev addresses; mesh_wire (the probe packet and the rate-limited
                         responder), mesh_peers (peer lists, grouping by switch, bounded peer
                         selection, local addresses), mesh_config, mesh_families
  mesh_discovery.py      the mesh's peer sources read with their state (peers file, DNS, LLDP)
  mesh_bind.py           the mesh's bound sockets and which one probes which peer
  mesh_prober.py         the mesh's per-packet path: sends, reads, replies matched, timeouts
  mesh_snapshot.py       the series the mesh publishes

Imports: `..base` and the top-level plumbing only (`http`, `webconfig`: the peers' endpoint);
never `simulate`, `health`, `daemon` or `cli`, nor another source's package (other sources'
series are read from the store by family name). The fake probe executables of the demo live in
`simulate/` and are reached only as configured binary paths.
"""
