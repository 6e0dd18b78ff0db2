"""Health score: signals -> component scores -> one 0-100 score with reasons.

Owns: the signals (`signals/`, one module per component), scoring and reasons, the serving
latency windows (`latency`), coverage notes, the health families, /api/v1/health, the status
page and `infrapulse score`.

Imports: the top-level plumbing (`store`, `columns`, `catalog`, `rates`, `schema`, `http`,
`inventory`, `services`, `xid`, `changes`) and the source registry (`sources`, `sources.spec`,
`sources.base`: loading it declares every family); never a source's own modules — it reads the
series by family name from the store. Nothing under `sources/` imports `health`
(tests/test_health_layering.py).
Never `simulate`, `daemon` or `cli` (tests/test_imports.py).
"""
