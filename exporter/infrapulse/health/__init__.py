"""Health score: signals -> component scores -> one 0-100 score with reasons.

Owns: the signal catalogue (`signals`), reading the store into signal values (`readings`,
`latency`, `quantiles`), curves and component/overall scores (`scoring`, `smoothing`), the
reason sentences (`reasons`), the service that ticks and publishes the score and serves
/api/v1/health and the status page (`service`, `page`), its config section (`config`), its own
families (`families`), the cross-instance PromQL (`promql`) and the `infrapulse score` CLI.

Imports: the top-level plumbing (`store`, `catalog`, `rates`, `schema`, `http`), `sources.base`
and what a source declares about its data (e.g. `sources.serving.normalize`). Never
`simulate`, `daemon` or `cli`; sources never import health (it reads what they publish
through the store).
"""
