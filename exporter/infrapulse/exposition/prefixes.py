"""Kept sample prefixes: one per series, encoded when the series first appears.

A cache belongs to one series dict's owner (source, target, family) and one naming (the escaped
sample name and label style), so text and OpenMetrics scrapes share it whenever they would write
the same bytes. Keys are the store's own label keys: a snapshot family replaced every poll finds
its previous prefixes again as long as its label sets are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

CacheKey = tuple[Hashable, ...]


class PrefixCache:
    """label key -> kept prefix (a str, or a tuple of them for a histogram's lines)."""

    __slots__ = ("prefixes", "used")

    def __init__(self) -> None:
        self.prefixes: dict[Any, Any] = {}
        self.used = True

    def lookup(self, keys: Iterable[Any], build: Callable[[Any], Any]) -> list[Any]:
        """The prefix of every key, in order; missing ones are built and kept. Prefixes of
        series that went away are dropped once they would outnumber the live ones by a quarter."""
        prefixes = self.prefixes
        found = list(map(prefixes.get, keys))
        if None in found:
            keys = list(keys) if not isinstance(keys, list) else keys
            for i, prefix in enumerate(found):
                if prefix is None:
                    found[i] = prefixes[keys[i]] = build(keys[i])
        self.trim(keys, found)
        return found

    def trim(self, keys: Iterable[Any], found: list[Any]) -> None:
        """Keep only the prefixes of `keys` (in order, `found`) once prefixes of series that went
        away would outnumber the live ones by a quarter. `keys` must be re-iterable (a view)."""
        live = len(found)
        if len(self.prefixes) > live + 64 + live // 4:
            self.prefixes = dict(zip(keys, found))
        self.used = True


class PrefixCaches:
    """Every kept PrefixCache, by owner and naming; caches not used by a render are dropped by
    the next one (an instance or family that went away)."""

    def __init__(self) -> None:
        self._caches: dict[CacheKey, PrefixCache] = {}

    def get(self, key: CacheKey) -> PrefixCache:
        cache = self._caches.get(key)
        if cache is None:
            cache = self._caches[key] = PrefixCache()
        cache.used = True
        return cache

    def sweep(self) -> None:
        """Drop caches the render that just finished did not use; mark the rest unused."""
        self._caches = {k: c for k, c in self._caches.items() if c.used}
        for cache in self._caches.values():
            cache.used = False

    def __len__(self) -> int:
        return sum(len(c.prefixes) for c in self._caches.values())
