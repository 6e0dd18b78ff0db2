"""Kept sample prefixes: encoded when a series first appears, then reused by every render.

A cache is keyed by an owner (source, target) and what its prefixes depend on: for catalogue
families that is the label names and escaping, so the many families of one switch port (all
labelled target + interface) share one label block per port instead of one per series. Keys
are the store's own label keys: a snapshot family replaced every poll finds its previous
prefixes again as long as its label sets are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

CacheKey = tuple[Hashable, ...]


class PrefixCache:
    """label key -> kept prefix (a str, or a tuple for a histogram's lines)."""

    __slots__ = ("prefixes", "used", "looked_up", "last")

    def __init__(self) -> None:
        self.prefixes: dict[Any, Any] = {}
        self.used = True
        self.looked_up = 0  # series looked up since the last sweep (duplicates counted)
        # per family: what its last lookup found, and how to tell its keys are unchanged: the
        # series and their `keys_version` when they have one (a gNMI column: no copy of its
        # keys kept, 8 bytes a series), else a copy of the keys, compared in C. A family whose
        # keys are unchanged gets its prefixes back without hashing a label tuple.
        self.last: dict[Hashable, tuple[Any, int | None, list[Any]]] = {}

    def lookup(self, series: Mapping[Any, Any], build: Callable[[Any], Any],
               family: Hashable = None) -> list[Any]:
        """The prefix of every key of `series`, in order; missing ones are built and kept.
        `series` may have a `keys_version` that changes whenever its keys do."""
        last = self.last.get(family)
        version: int | None = getattr(series, "keys_version", None)
        if version is not None:
            if last is not None and last[0] is series and last[1] == version:
                found: list[Any] = last[2]
            else:
                found = self._find(list(series.keys()), build)
                self.last[family] = (series, version, found)
        else:
            listed = list(series.keys())
            if last is not None and last[1] is None and last[0] == listed:
                found = last[2]
            else:
                found = self._find(listed, build)
                self.last[family] = (listed, None, found)
        self.used = True  # seen(), inlined: a node render looks up ~280 small families
        self.looked_up += len(found)
        return found

    def _find(self, keys: list[Any], build: Callable[[Any], Any]) -> list[Any]:
        prefixes = self.prefixes
        found = list(map(prefixes.get, keys))
        if None in found:
            for i, prefix in enumerate(found):
                if prefix is None:
                    found[i] = prefixes[keys[i]] = build(keys[i])
        return found

    def seen(self, count: int) -> None:
        self.used = True
        self.looked_up += count

    def stale(self) -> bool:
        """More kept prefixes than series looked up since the last sweep: some belong to series
        that went away. (A shared cache may hold up to its live series' count of dead ones before
        this shows, which bounds them.)"""
        return len(self.prefixes) > self.looked_up + 64


class PrefixCaches:
    """Every kept PrefixCache by key. After each render `sweep` drops those it did not use (an
    instance or family that went away) and empties those holding dead series' prefixes."""

    def __init__(self) -> None:
        self._caches: dict[CacheKey, PrefixCache] = {}
        # Bumped whenever a sweep drops a cache: encoders that keep the caches they got by owner
        # (FamilyEncoder.cache) forget them then, so a dropped cache is never used again.
        self.epoch = 0

    def get(self, key: CacheKey) -> PrefixCache:
        cache = self._caches.get(key)
        if cache is None:
            cache = self._caches[key] = PrefixCache()
        cache.used = True
        return cache

    def sweep(self) -> None:
        kept = {k: c for k, c in self._caches.items() if c.used}
        if len(kept) != len(self._caches):
            self.epoch += 1
        self._caches = kept
        for cache in self._caches.values():
            if cache.stale():
                cache.prefixes = {}  # rebuilt, live series only, by the next render
                cache.last = {}
            cache.used = False
            cache.looked_up = 0

    def __len__(self) -> int:
        return sum(len(c.prefixes) for c in self._caches.values())
