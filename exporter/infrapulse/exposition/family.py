"""One catalogue family written in one style: its header lines and its series' sample lines.

Mirrors what `metrics.family_metric` hands prometheus_client, sample for sample: label values in
declared order (empty ones dropped when the family has optional labels), passthrough series
keyed by (label, value) pairs, histograms as buckets, then _count, then _sum.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from itertools import chain, repeat
from operator import add
from typing import Any

from .. import catalog
from ..store import Histogram
from .floats import go_float, go_floats, small_go_floats
from .names import family_name, help_text, label_block, sample_head, sample_prefix
from .prefixes import PrefixCache, PrefixCaches
from .style import Style

_PROMETHEUS_TYPE = {catalog.COUNTER: "counter", catalog.GAUGE: "gauge", catalog.HISTOGRAM: "histogram",
                    catalog.INFO: "gauge", catalog.UNTYPED: "untyped"}


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(float(bound))


class FamilyEncoder:
    """Encodes the series of one family; the kept prefixes live in the PrefixCaches passed in."""

    def __init__(self, family: catalog.Family, style: Style) -> None:
        self.family = family
        self.style = style
        self.header = "".join(line + "\n" for line in self._header())
        self.labelnames = family.labels + family.optional_labels
        self.drop_empty = bool(family.optional_labels)
        head, quoted = sample_head(family.name, style)
        # Plain families keep only label blocks, shared by every family of an instance with the
        # same label names; the sample name is written in front at render time.
        self.shared_blocks = (family.type != catalog.HISTOGRAM and not family.passthrough
                              and not quoted)
        self.head = head
        if self.shared_blocks:
            self._cache_tail: tuple[Hashable, ...] = (
                "blocks", self.labelnames, self.drop_empty, style.escaping)
        else:  # whole prefixes of this family (its name is in them)
            self._cache_tail = ("family", family.name, style)
        # The caches this encoder got by owner, valid while PrefixCaches.epoch is unchanged: a
        # dict lookup on the owner instead of building and hashing the full cache key.
        self._owner_caches: dict[tuple[str, str], PrefixCache] = {}
        self._epoch = -1

    def _header(self) -> list[str]:
        family, style = self.family, self.style
        name, typ = family.name, family.type
        base = (name[: -len("_total")] if typ == catalog.COUNTER
                else name[: -len("_info")] if typ == catalog.INFO else name)
        if style.openmetrics:
            shown, shown_type = base, typ
        else:  # text 0.0.4: prometheus_client's munging of OpenMetrics types
            shown = (base + "_total" if typ == catalog.COUNTER
                     else base + "_info" if typ == catalog.INFO else base)
            shown_type = _PROMETHEUS_TYPE[typ]
        shown = family_name(shown, style)
        return [f"# HELP {shown} {help_text(family.help, style)}", f"# TYPE {shown} {shown_type}"]

    def _caches_by_owner(self, caches: PrefixCaches) -> dict[tuple[str, str], PrefixCache]:
        if self._epoch != caches.epoch:
            self._owner_caches = {}
            self._epoch = caches.epoch
        return self._owner_caches

    def cache(self, caches: PrefixCaches, owner: tuple[str, str]) -> PrefixCache:
        by_owner = self._caches_by_owner(caches)
        cache = by_owner.get(owner)
        if cache is None:
            cache = by_owner[owner] = caches.get((*owner, *self._cache_tail))
        cache.used = True
        return cache

    # -- label keys -> sorted label pairs ---------------------------------------------------------

    def pairs(self, key: Any) -> list[tuple[str, str]]:
        """The label pairs of a series key, sorted by name, as prometheus_client prints them."""
        if self.family.passthrough:
            return sorted(dict(key).items())
        if self.drop_empty:
            labels = {n: v for n, v in zip(self.labelnames, key) if v != ""}
        else:
            labels = dict(zip(self.labelnames, key))
        return sorted(labels.items())

    def block(self, key: Any) -> str:
        return label_block(self.pairs(key), self.style)

    def scalar_prefix(self, key: Any) -> str:
        return sample_prefix(self.family.name, self.pairs(key), self.style)

    def histogram_prefixes(self, key: Any, bounds: tuple[float, ...]) -> tuple[Any, ...]:
        """(bounds, bucket prefixes..., _count prefix, _sum prefix) of one histogram series."""
        name, style = self.family.name, self.style
        pairs = self.pairs(key)
        buckets = tuple(sample_prefix(name + "_bucket", sorted([*pairs, ("le", _le(b))]), style)
                        for b in bounds)
        return (bounds, *buckets, sample_prefix(name + "_count", pairs, style),
                sample_prefix(name + "_sum", pairs, style))

    # -- sample lines ------------------------------------------------------------------------------

    def instances(self, instances: list[tuple[tuple[str, str], Mapping[Any, Any]]],
                  caches: PrefixCaches) -> str:
        """The header and the sample lines of every instance's series of this family, in order."""
        parts = [self.header]
        if not self.shared_blocks:
            parts.extend([self._mixed_chunk(series, self.cache(caches, owner))
                          for owner, series in instances])
            return "".join(parts)
        by_owner, head = self._caches_by_owner(caches), self.head
        for owner, series in instances:
            cache = by_owner.get(owner)
            if cache is None:
                cache = self.cache(caches, owner)
            cache.used = True
            if len(series) != 1:
                parts.append(self.chunk(series, cache))
                continue
            # Most of a node's family instances: one series per device and port. Inlined, with
            # no call per instance (a node render writes ~260 of them).
            for key, value in series.items():
                block = cache.prefixes.get(key)
                if block is None:
                    block = cache.prefixes[key] = self.block(key)
                cache.looked_up += 1
                parts.append(f"{head}{block}{go_float(value)}\n")
        return "".join(parts)

    def chunk(self, series: Mapping[Any, Any], cache: PrefixCache) -> str:
        """The sample lines of one instance's series of this family, each ending in a newline."""
        if self.shared_blocks:
            blocks = cache.lookup(series, self.block, self.family.name)
            if len(blocks) <= 8:  # a node's per-device families: plain loops beat the bulk setup
                head = self.head
                return "".join([f"{head}{block}{value}\n"
                                for block, value in zip(blocks, small_go_floats(series.values()))])
            values = go_floats(series.values())
            # name, block, value, newline for every series, joined once (no string per line)
            pieces = chain.from_iterable(zip(repeat(self.head), blocks, values, repeat("\n")))
            return "".join(pieces)
        return self._mixed_chunk(series, cache)

    def _mixed_chunk(self, series: Mapping[Any, Any], cache: PrefixCache) -> str:
        """Histograms and passthrough families (which may mix histograms and plain values)."""
        prefixes = cache.prefixes
        out: list[str] = []
        for key, value in series.items():
            prefix = prefixes.get(key)
            if isinstance(value, Histogram):
                bounds = tuple(b for b, _ in value.buckets)
                if not isinstance(prefix, tuple) or prefix[0] != bounds:
                    prefix = prefixes[key] = self.histogram_prefixes(key, bounds)
                out.extend(map(add, prefix[1:-2], [go_float(c) for _, c in value.buckets]))
                out.append(prefix[-2] + go_float(value.count))
                out.append(prefix[-1] + go_float(value.sum))
            else:
                if not isinstance(prefix, str):
                    prefix = prefixes[key] = self.scalar_prefix(key)
                out.append(prefix + go_float(value))
        cache.seen(len(series))
        out.append("")
        return "\n".join(out)
