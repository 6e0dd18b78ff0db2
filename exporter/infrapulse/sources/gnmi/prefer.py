"""One leaf per series where a switch sends two that measure the same thing.

OpenConfig has `in-fcs-errors` beside `ethernet/.../in-crc-errors`, and `carrier-transitions`
(deprecated) beside `interface-transitions` and `link-transitions`; a switch may send any subset.
A profile ranks such rules (`rank: 0` is preferred) and each series then takes the value of the
best-ranked leaf this switch actually sends, never a sum and never a value flipping between two
leaves:

  - a leaf of a worse rank than the series' current feeder is not bound (and not cached as
    unmapped, so it is looked at again when it next arrives);
  - a leaf of a better rank takes the series over; the bindings it displaces are removed once
    the notification that brought it has been applied, never in the middle of a bulk plan, and
    that notification is applied once more without them (`SwitchState._settle_preferences`), so
    a displaced leaf written after the preferred one never shows, not even for one sample;
  - when the feeding leaf goes (expired, deleted, switch resync), the plans that skipped a
    worse-ranked leaf are forgotten, so that leaf binds again on its next arrival.

Leaves of equal rank share the series as unranked ones do (the last written wins): the same leaf
reached through two notification prefixes, or a leaf sent both module-qualified and not.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Generic, Protocol, TypeVar

from .profile import Rule

SeriesKey = tuple[str, tuple[str, ...]]  # (family name, label values)


class Ranked(Protocol):
    """What a preference reads of a binding (bindings.Binding): its rule and its label values."""

    @property
    def rule(self) -> Rule: ...

    @property
    def labels(self) -> tuple[str, ...]: ...


Binding = TypeVar("Binding", bound=Ranked)


class _Feeders(Generic[Binding]):
    __slots__ = ("rank", "bindings")

    def __init__(self, rank: int, binding: Binding) -> None:
        self.rank = rank
        self.bindings: list[Binding] = [binding]


class Preferences(Generic[Binding]):
    """Which ranked bindings feed each series of one switch."""

    __slots__ = ("_feeders", "_waiting", "displaced", "refused")

    def __init__(self) -> None:
        self._feeders: dict[SeriesKey, _Feeders[Binding]] = {}
        # Notification prefixes whose bulk plans skipped a worse-ranked leaf of the series.
        self._waiting: dict[SeriesKey, set[Any]] = {}
        self.displaced: list[Binding] = []  # to remove after the current notification
        self.refused = 0  # leaves not bound because a better-ranked one feeds their series

    def claim(self, binding: Binding, owner: Any) -> bool:
        """Whether `binding` (whose rule has a rank) may feed its series. `owner` is the prefix
        state whose plans must be forgotten once a refused leaf may bind again (None for JSON)."""
        rank = binding.rule.rank
        assert rank is not None
        key = (binding.rule.family.name, binding.labels)
        feeders = self._feeders.get(key)
        if feeders is None:
            self._feeders[key] = _Feeders(rank, binding)
            return True
        if rank == feeders.rank:
            feeders.bindings.append(binding)
            return True
        if rank < feeders.rank:
            self.displaced += feeders.bindings
            self._feeders[key] = _Feeders(rank, binding)
            return True
        self.refused += 1
        if owner is not None:
            self._waiting.setdefault(key, set()).add(owner)
        return False

    def release(self, binding: Binding) -> Iterable[Any]:
        """`binding` is being removed: if it fed its series, worse-ranked leaves may bind again.
        Returns the prefix states whose plans must be forgotten for that (they skipped one)."""
        key = (binding.rule.family.name, binding.labels)
        feeders = self._feeders.get(key)
        if feeders is None or binding not in feeders.bindings:
            return ()  # a displaced binding: it no longer feeds anything
        feeders.bindings.remove(binding)
        if feeders.bindings:
            return ()
        del self._feeders[key]
        return self._waiting.pop(key, ())

    def take_displaced(self) -> list[Binding]:
        displaced, self.displaced = self.displaced, []
        return displaced

    def clear(self) -> None:
        self._feeders.clear()
        self._waiting.clear()
        self.displaced.clear()


__all__ = ["Preferences"]
