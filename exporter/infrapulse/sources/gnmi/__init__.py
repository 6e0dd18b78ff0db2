"""Switch telemetry over gNMI: one Subscribe session per switch this shard owns.

  session.py  the Source: config, shard ownership, one task per switch (being split)
  paths.py values.py wire.py     gNMI paths, typed values, the bulk wire views
  profile.py profiles/*.yaml     vendor profiles: which paths to subscribe, how they map
  ingest.py columns.py           notifications -> the columnar per-switch store (the hot path)
  families.py shard.py           the switch families; stable hash sharding

Imports: `..base` and the top-level plumbing only.
"""
