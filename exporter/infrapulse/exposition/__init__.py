"""The /metrics exposition encoder: the store's series written as text 0.0.4 or OpenMetrics.

prometheus_client builds a Sample object per series and re-escapes every label set on every
scrape; at fabric scale (hundreds of thousands of series) that is seconds of CPU per render.
Here a series' name and label block (its "prefix") is encoded once and kept; a render writes the
kept prefixes and the current values. The output is byte-identical to prometheus_client's
encoders (tests/test_exposition*.py compare the two), which remain the reference.

Owns: the encoder (`store_encoder`, `family`), the kept prefixes (`prefixes`), name and value
formatting (`names`, `floats`), the style a scrape negotiated (`style`) and the registry that
renders through the encoder (`registry`).

Imports: `catalog` and `store` (what it encodes) and prometheus_client. Never `metrics`, `http`
or the sources: the store collector is handed in (store_encoder.StoreSeries) by the registry it
is registered on.
"""

from .registry import ExpositionRegistry, gzip_chunks, render_body, render_chunks
from .style import Style, style_of

__all__ = ["ExpositionRegistry", "Style", "gzip_chunks", "render_body", "render_chunks", "style_of"]
