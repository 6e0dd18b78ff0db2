"""Switch telemetry over gNMI: one Subscribe session per switch this shard owns.

  source.py   the Source: shard ownership, targets, one session per switch
  config.py   the sources.gnmi schema, targets_file, per-switch settings (merge_target)
  channel.py  credentials, secrets and PEM files, the gRPC channel (TLS unless insecure)
  session.py  one switch: Capabilities, Subscribe streams, reconnects, error reasons
  paths.py values.py wire.py     gNMI paths, typed values, the bulk wire views
  profile.py profiles/*.yaml     vendor profiles: which paths to subscribe, how they map
  ingest.py columns.py           notifications -> the columnar per-switch store: SwitchState
    bulk.py plans.py             the hot path: counter samples through cached bulk-write plans
    per_update.py json_values.py everything else, update by update; JSON subtrees
    binder.py bindings.py        leaf paths bound to series (aliases, limits, preferences)
    series_writes.py deletes.py  enums, time stamps, _info parts, bit times; gNMI deletes
    shared.py prefer.py coverage.py ports.py  shared copies; ranked leaves; coverage; aliases
  families.py shard.py           the switch families; stable hash sharding

Imports: `..base` and the top-level plumbing only.
"""
