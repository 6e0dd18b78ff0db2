"""The store (and the daemon's own families) encoded as metrics.StoreCollector would have it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import chain
from typing import Any, Protocol, runtime_checkable

from .. import catalog
from .family import FamilyEncoder
from .prefixes import PrefixCaches
from .runs import Instances, Run, fits_a_run
from .style import Style

DAEMON_OWNER = ("", "")  # the cache owner of the daemon's own families


@runtime_checkable
class StoreSeries(Protocol):
    """What a collector hands the encoder (metrics.StoreCollector has it): the store's series
    dicts by family name with their (source, target), and the daemon's own families."""

    def families(self) -> tuple[dict[str, list[tuple[tuple[str, str], Mapping[Any, Any]]]],
                                dict[str, int]]: ...

    def own_families(self, series_per_source: dict[str, int]
                     ) -> list[tuple[catalog.Family, dict[tuple[str, ...], float]]]: ...


@runtime_checkable
class CatalogSeries(Protocol):
    """A collector of a few catalogue families of its own (httpguard.HttpStats has it): each
    family with its series dict, in the order collect() yields them."""

    def catalog_series(self) -> list[tuple[catalog.Family, dict[tuple[str, ...], float]]]: ...


class _Encoders:
    """FamilyEncoders by style, then family name (a frozen dataclass hashes every field: a node
    render looks up ~50 families), and the kept prefixes and runs they write through."""

    def __init__(self) -> None:
        self.caches = PrefixCaches()
        self._by_style: dict[Style, dict[str, FamilyEncoder]] = {}
        self._runs: dict[Style, list[Run]] = {}  # by style, in render order

    def encoders(self, style: Style) -> dict[str, FamilyEncoder]:
        encoders = self._by_style.get(style)
        if encoders is None:
            encoders = self._by_style[style] = {}
        return encoders

    @staticmethod
    def encoder(encoders: dict[str, FamilyEncoder], family: catalog.Family, style: Style) -> FamilyEncoder:
        encoder = encoders.get(family.name)
        if encoder is None or encoder.family is not family:
            encoder = encoders[family.name] = FamilyEncoder(family, style)
        return encoder

    def written(self, style: Style, families: Iterable[tuple[FamilyEncoder, Instances]]) -> Iterator[str]:
        """`families` (each with at least one series) in order: consecutive small ones as one run
        (see runs.py), a large one a family at a time (its lines, each ending in a newline); a
        gzip scrape compresses them as they come, never holding the whole text."""
        caches = self.caches
        runs = self._runs.setdefault(style, [])
        used = 0  # runs of this render so far
        pending: list[tuple[FamilyEncoder, Instances]] = []  # the current run's families

        def run_text() -> str:
            nonlocal used
            if used == len(runs):
                runs.append(Run())
            used += 1
            text = runs[used - 1].render(pending, caches)
            pending.clear()
            return text

        for encoder, instances in families:
            if fits_a_run(encoder, instances):
                pending.append((encoder, instances))
                continue
            if pending:
                yield run_text()
            yield encoder.instances(instances, caches)
        if pending:
            yield run_text()
        del runs[used:]  # runs this render no longer has
        caches.sweep()

    def kept_prefixes(self) -> int:
        """Prefixes kept for the next render: label blocks and the runs' whole prefixes."""
        return len(self.caches) + sum(len(run.prefixes) for runs in self._runs.values() for run in runs)


class CatalogEncoder(_Encoders):
    """Renders a CatalogSeries collector as prometheus_client would its collect()."""

    def __init__(self, collector: CatalogSeries) -> None:
        super().__init__()
        self.collector = collector

    def render(self, style: Style) -> Iterator[str]:
        encoders = self.encoders(style)
        return self.written(style, [(self.encoder(encoders, family, style), [(DAEMON_OWNER, series)])
                                    for family, series in self.collector.catalog_series() if series])


class StoreEncoder(_Encoders):
    """Renders what the collector's `collect()` yields, through kept prefixes."""

    def __init__(self, collector: StoreSeries) -> None:
        super().__init__()
        self.collector = collector

    def render(self, style: Style) -> Iterator[str]:
        """The daemon's own families, then the store's by name, as `written` writes them."""
        by_family, series_per_source = self.collector.families()
        encoders, get_encoder = self.encoders(style), self.encoder
        own: list[tuple[FamilyEncoder, Instances]] = [
            (get_encoder(encoders, family, style), [(DAEMON_OWNER, series)])
            for family, series in self.collector.own_families(series_per_source) if series]
        store: Iterator[tuple[FamilyEncoder, Instances]] = (
            (get_encoder(encoders, catalog.get(name), style), by_family[name]) for name in sorted(by_family))
        return self.written(style, chain(own, store))
