"""A CollectorRegistry that renders through the exposition encoder where a collector has one.

Collectors that hand over the store's series (store_encoder.StoreSeries: metrics.StoreCollector)
are written from kept prefixes; the
others (process_*, the HTTP guard's counters: a few dozen series) through prometheus_client's own
encoder, in registration order, so the body is what `encoder(registry)` would return.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, cast, runtime_checkable

from prometheus_client import exposition
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import exposition as om_exposition
from prometheus_client.registry import Collector, CollectorRegistry

from .floats import go_float
from .store_encoder import CatalogEncoder, CatalogSeries, StoreEncoder, StoreSeries
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
        # prometheus_client annotates exposition.generate_latest but not its OpenMetrics twin,
        # which takes the same (collector, escaping=) and returns the encoded body too.
        om_generate_latest = cast("Callable[..., bytes]", om_exposition.generate_latest)
        body = om_generate_latest(_Metrics(metrics), escaping=style.escaping)
        return body[: -len(EOF_LINE)]
    return exposition.generate_latest(_Metrics(metrics), escaping=style.escaping)


@runtime_checkable
class PlainValues(Protocol):
    """A collector of unlabelled families whose name alone fixes their type, help and samples
    (process.FastProcessCollector): values() gives (name, value) pairs without building Metric
    objects; metric() builds one for prometheus_client to write the first time a name is seen."""

    def values(self) -> list[tuple[str, float]]: ...

    def metric(self, name: str, value: float) -> Metric: ...


class UnlabelledMetrics:
    """Metrics whose samples have no labels, timestamp or exemplar (process_*): prometheus_client
    writes one of a given shape (name, type, help, sample names, style) once; later renders reuse
    its header and sample names and write only the values. A shape whose text is not header then
    one "name value" line per sample (e.g. a counter's _created) always goes to prometheus_client."""

    def __init__(self) -> None:
        self._shapes: dict[tuple[Any, ...], tuple[str, list[str]] | None] = {}

    def body(self, metrics: Iterable[Metric], style: Style) -> bytes:
        out: list[str] = []
        for metric in metrics:
            samples = metric.samples
            plain = bool(samples) and not any(s.labels or s.timestamp is not None or s.exemplar is not None
                                              for s in samples)
            key = (metric.name, metric.type, metric.documentation, metric.unit,
                   tuple(s.name for s in samples), style)
            shape = self._shapes.get(key) if plain else None
            if shape is None:
                text = reference_body([metric], style).decode("utf-8")
                if plain and key not in self._shapes:
                    self._shapes[key] = self._shape(text, samples)
                out.append(text)
                continue
            header, names = shape
            out.append(header)
            out.extend([f"{name}{go_float(s.value)}\n" for name, s in zip(names, samples)])
        return "".join(out).encode("utf-8")

    def values_body(self, collector: PlainValues, style: Style) -> bytes:
        """body() of a PlainValues collector's families, from the shape kept for each name."""
        out: list[str] = []
        for name, value in collector.values():
            key = (name, style)
            shape = self._shapes.get(key)
            if shape is None:
                metric = collector.metric(name, value)
                text = reference_body([metric], style).decode("utf-8")
                if key not in self._shapes:  # a shape of one sample line, else prometheus_client's
                    one = len(metric.samples) == 1
                    self._shapes[key] = self._shape(text, metric.samples) if one else None
                out.append(text)
                continue
            header, (sample_name,) = shape
            out.append(f"{header}{sample_name}{go_float(value)}\n")
        return "".join(out).encode("utf-8")

    @staticmethod
    def _shape(text: str, samples: list[Any]) -> tuple[str, list[str]] | None:
        lines = text.split("\n")[:-1]
        if len(lines) < len(samples):
            return None
        split = len(lines) - len(samples)
        names = [line[: line.rfind(" ") + 1] for line in lines[split:]]
        header = "".join(line + "\n" for line in lines[:split])
        rebuilt = header + "".join(f"{name}{go_float(s.value)}\n" for name, s in zip(names, samples))
        return (header, names) if rebuilt == text else None


class ExpositionRegistry(CollectorRegistry):
    """Keeps its collectors in order and each fast collector's encoder (with its kept prefixes)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ordered: list[Collector] = []
        self._encoders: dict[int, StoreEncoder | CatalogEncoder] = {}
        self._unlabelled = UnlabelledMetrics()
        self._plain: set[int] = set()  # ids of the PlainValues collectors

    def register(self, collector: Collector) -> None:
        super().register(collector)
        self._ordered.append(collector)
        if isinstance(collector, StoreSeries):
            self._encoders[id(collector)] = StoreEncoder(collector)
        elif isinstance(collector, CatalogSeries):
            self._encoders[id(collector)] = CatalogEncoder(collector)
        elif isinstance(collector, PlainValues):
            self._plain.add(id(collector))

    def unregister(self, collector: Collector) -> None:
        super().unregister(collector)
        self._ordered.remove(collector)
        self._encoders.pop(id(collector), None)
        self._plain.discard(id(collector))

    def chunks(self, style: Style) -> Iterator[bytes]:
        """The exposition in `style`, piece by piece (a family instance at a time for the store)."""
        for collector in list(self._ordered):
            encoder = self._encoders.get(id(collector))
            if id(collector) in self._plain:
                yield self._unlabelled.values_body(collector, style)  # type: ignore[arg-type]
            elif encoder is None:
                yield self._unlabelled.body(collector.collect(), style)
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
