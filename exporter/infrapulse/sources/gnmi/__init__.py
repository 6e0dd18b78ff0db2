"""Switch telemetry over gNMI: one Subscribe session per switch this shard owns.

  source.py   the Source: shard ownership, targets, one session per switch
  config.py   the sources.gnmi schema, targets_file, per-switch settings (merge_target)
  channel.py  credentials, secrets and PEM files, the gRPC channel (TLS unless insecure)
  session.py  one switch: Capabilities, Subscribe streams, reconnects, error reasons
  paths.py values.py wire.py     gNMI paths, typed values, the bulk wire views
  profile.py profiles/*.yaml     vendor profiles: which paths to subscribe, how they map
  ingest.py columns.py           notifications -> the columnar per-switch store (the hot path)
  families.py shard.py           the switch families; stable hash sharding

Imports: `..base` and the top-level plumbing only.
"""
