"""The store (and the daemon's own families) encoded as StoreCollector would have it encoded."""

from __future__ import annotations

from .. import catalog
from ..metrics import DaemonState, families_by_name, self_series
from ..store import Store
from .family import FamilyEncoder
from .prefixes import PrefixCaches
from .style import Style

DAEMON_OWNER = ("", "")  # the cache owner of the daemon's own families


class StoreEncoder:
    """Renders what `metrics.StoreCollector.collect()` yields, through kept prefixes."""

    def __init__(self, store: Store, state: DaemonState) -> None:
        self.store = store
        self.state = state
        self.caches = PrefixCaches()
        self._encoders: dict[tuple[catalog.Family, Style], FamilyEncoder] = {}

    def _encoder(self, family: catalog.Family, style: Style) -> FamilyEncoder:
        key = (family, style)
        encoder = self._encoders.get(key)
        if encoder is None:
            encoder = self._encoders[key] = FamilyEncoder(family, style)
        return encoder

    def render(self, style: Style) -> list[str]:
        """The store's families in `style` as chunks of lines, to be joined with newlines."""
        self.store.expire()
        by_family, series_per_source = families_by_name(self.store)
        out: list[str] = []
        for family, own in self_series(self.store, self.state, series_per_source):
            if own:
                encoder = self._encoder(family, style)
                out.append(encoder.header)
                out.append(encoder.chunk(own, encoder.cache(self.caches, DAEMON_OWNER)))
        for name in sorted(by_family):
            encoder = self._encoder(catalog.get(name), style)
            out.append(encoder.header)
            for owner, series in by_family[name]:
                out.append(encoder.chunk(series, encoder.cache(self.caches, owner)))
        self.caches.sweep()
        return out
