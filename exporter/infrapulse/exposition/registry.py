"""A CollectorRegistry that renders through the exposition encoder where a collector has one.

Collectors that hand over the store's series (store_encoder.StoreSeries: metrics.StoreCollector)
are written from kept prefixes; the
others (process_*, the HTTP guard's counters: a few dozen series) through prometheus_client's own
encoder, in registration order, so the body is what `encoder(registry)` would return.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import exposition
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import exposition as om_exposition
from prometheus_client.registry import Collector, CollectorRegistry

from .store_encoder import StoreEncoder, StoreSeries
from .style import Style, style_of

EOF_LINE = b"# EOF\n"


class _Metrics:
    """A one-shot collector of already collected metrics, for prometheus_client's encoders."""

    def __init__(self, metrics: Iterable[Metric]) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        return iter(self._metrics)


def reference_body(metrics: Iterable[Metric], style: Style) -> bytes:
    """prometheus_client's encoding of `metrics` (without OpenMetrics' closing # EOF)."""
    if style.openmetrics:
        body = om_exposition.generate_latest(_Metrics(metrics), escaping=style.escaping)
        return body[: -len(EOF_LINE)]
    return exposition.generate_latest(_Metrics(metrics), escaping=style.escaping)


class ExpositionRegistry(CollectorRegistry):
    """Keeps its collectors in order and each fast collector's encoder (with its kept prefixes)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ordered: list[Collector] = []
        self._encoders: dict[int, StoreEncoder] = {}

    def register(self, collector: Collector) -> None:
        super().register(collector)
        self._ordered.append(collector)
        if isinstance(collector, StoreSeries):
            self._encoders[id(collector)] = StoreEncoder(collector)

    def unregister(self, collector: Collector) -> None:
        super().unregister(collector)
        self._ordered.remove(collector)
        self._encoders.pop(id(collector), None)

    def chunks(self, style: Style) -> Iterator[bytes]:
        """The exposition in `style`, piece by piece (a family instance at a time for the store)."""
        for collector in list(self._ordered):
            encoder = self._encoders.get(id(collector))
            if encoder is None:
                yield reference_body(collector.collect(), style)
            else:
                for chunk in encoder.render(style):
                    yield chunk.encode("utf-8")
        if style.openmetrics:
            yield EOF_LINE

    def render(self, style: Style) -> bytes:
        return b"".join(self.chunks(style))


def render_chunks(registry: object, encoder: Callable[..., bytes]) -> Iterable[bytes]:
    """The /metrics body `encoder` (from exposition.choose_encoder) asks for, in pieces: through
    the fast encoder when the registry has one and the style is one it writes, else
    prometheus_client's encoder over the registry."""
    style = style_of(encoder)
    if style is not None and isinstance(registry, ExpositionRegistry):
        return registry.chunks(style)
    return [encoder(registry)]


def render_body(registry: object, encoder: Callable[..., bytes]) -> bytes:
    """The whole /metrics body (see render_chunks)."""
    return b"".join(render_chunks(registry, encoder))


def gzip_chunks(chunks: Iterable[bytes], level: int = 1) -> bytes:
    """A gzip member of the pieces, compressed as they come (level 1: the body is mostly label
    blocks repeated across families, which even the fastest level shrinks ~15x)."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, 31)  # wbits 31: gzip header and trailer
    out = [compressor.compress(chunk) for chunk in chunks]
    out.append(compressor.flush())
    return b"".join(out)
