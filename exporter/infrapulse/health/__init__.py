"""Health score: signals -> component scores -> one 0-100 score with reasons.

Owns: the signals (`signals/`, one module per component), scoring and reasons, the serving
latency windows (`latency`), coverage notes, the health families, /api/v1/health, the status
page and `infrapulse score`.

Imports: the top-level plumbing (`store`, `catalog`, `rates`, `schema`, `http`, `inventory`) and,
read-only, what the sources declare (their family modules, `sources.gpu.xid`). Nothing under `sources/`
imports `health` (tests/test_health_layering.py): health reads what the sources publish.
Never `simulate`, `daemon` or `cli` (tests/test_imports.py).
"""
