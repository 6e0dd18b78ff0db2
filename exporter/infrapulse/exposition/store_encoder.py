"""The store (and the daemon's own families) encoded as metrics.StoreCollector would have it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

from .. import catalog
from .family import FamilyEncoder
from .prefixes import PrefixCaches
from .style import Style

DAEMON_OWNER = ("", "")  # the cache owner of the daemon's own families


@runtime_checkable
class StoreSeries(Protocol):
    """What a collector hands the encoder (metrics.StoreCollector has it): the store's series
    dicts by family name with their (source, target), and the daemon's own families."""

    def families(self) -> tuple[dict[str, list[tuple[tuple[str, str], Mapping[Any, Any]]]],
                                dict[str, int]]: ...

    def own_families(self, series_per_source: dict[str, int]) -> list[tuple[catalog.Family, dict]]: ...


class StoreEncoder:
    """Renders what the collector's `collect()` yields, through kept prefixes."""

    def __init__(self, collector: StoreSeries) -> None:
        self.collector = collector
        self.caches = PrefixCaches()
        self._encoders: dict[tuple[catalog.Family, Style], FamilyEncoder] = {}

    def _encoder(self, family: catalog.Family, style: Style) -> FamilyEncoder:
        key = (family, style)
        encoder = self._encoders.get(key)
        if encoder is None:
            encoder = self._encoders[key] = FamilyEncoder(family, style)
        return encoder

    def render(self, style: Style) -> Iterator[str]:
        """The collector's families in `style`, a family at a time (its lines, each ending in a
        newline): a gzip scrape compresses them as they come, never holding the whole text."""
        by_family, series_per_source = self.collector.families()
        caches = self.caches
        for family, own in self.collector.own_families(series_per_source):
            if own:
                encoder = self._encoder(family, style)
                yield encoder.header + encoder.chunk(own, encoder.cache(caches, DAEMON_OWNER))
        for name in sorted(by_family):
            encoder = self._encoder(catalog.get(name), style)
            chunk, cache = encoder.chunk, encoder.cache
            parts = [encoder.header]
            for owner, series in by_family[name]:
                parts.append(chunk(series, cache(caches, owner)))
            yield "".join(parts)
        caches.sweep()
