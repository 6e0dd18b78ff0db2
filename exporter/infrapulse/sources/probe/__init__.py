"""Active probes: nccl-tests and perftest runs from the workload's side, result files dropped by
jobs, and per-size baselines with verdicts persisted under the daemon's `state_dir`.

  nccl.py, perftest.py   parsers of every output format of the two tools (text tables of every
                         version, JSON), pure functions over text
  results.py             what the parsers return
  families.py            the `infrapulse_probe_*` families
  versions.py            what a run ran under (NIC firmware, drivers, NCCL, config hashes)
  idle.py                whether the node may be probed now (GPU processes, serving, flag file)
  runner.py              one probe process: lock, lowered priority, hard timeout on its group
  baseline.py, state.py  baselines, verdicts, before/after records and their persistence
  inbox.py               result files written by Kubernetes Jobs or Slurm steps, ingested once
  source.py              the `probe` source: scheduling and publishing

(The always-on latency mesh lives beside these in mesh*.py.)

Imports: `..base` and the top-level plumbing only; never `simulate`, `health`, `daemon` or
`cli`. The fake probe executables of the demo live in `simulate/` and are reached only as
configured binary paths.
"""
