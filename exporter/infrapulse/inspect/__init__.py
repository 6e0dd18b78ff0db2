"""Inspections: when the score drops (or on demand), gather the evidence an engineer would.

Queue -> compute -> network, each layer's values in the window before the drop against the
window since, ranked by how far each moved, ending in one verdict that names a layer and a
target (endpoint, GPU or port). Everything is read from what the daemon already holds: the
health report of every pass (its signals' per-target values) and the store; on a node whose
switches another instance collects, optionally a Prometheus query API for the switch side.
An inspection never runs a probe.

Modules, one concept each: `config` (the `inspect:` section), `sample` (what one pass
records, per layer: `queue`, `compute`, `network`), `recorder` (the bounded ring of samples),
`compare` (window statistics and ranking), `verdict`, `trigger` (crossings, rate limits),
`reports` (the bounded store under state_dir), `switchside` (the optional Prometheus query),
`service` (the daemon task), `api` (JSON), `page` (HTML), `families` (metrics), `cli`.

Imports: `..health` (report types and settings classes, never its service internals), `..store`,
`..http`, `..webconfig`; nothing imports this package but `..config` (the `inspect:` settings), the
daemon, the CLI and the docs generator.
"""
