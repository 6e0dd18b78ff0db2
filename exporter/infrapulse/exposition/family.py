"""One catalogue family written in one style: its header lines and its series' sample lines.

Mirrors what `metrics.family_metric` hands prometheus_client, sample for sample: label values in
declared order (empty ones dropped when the family has optional labels), passthrough series
keyed by (label, value) pairs, histograms as buckets, then _count, then _sum.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from operator import add
from typing import Any

from .. import catalog
from ..store import Histogram
from .floats import go_float, go_floats
from .names import family_name, help_text, sample_prefix
from .prefixes import PrefixCache
from .style import Style

_PROMETHEUS_TYPE = {catalog.COUNTER: "counter", catalog.GAUGE: "gauge", catalog.HISTOGRAM: "histogram",
                    catalog.INFO: "gauge", catalog.UNTYPED: "untyped"}


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(float(bound))


class FamilyEncoder:
    """Encodes the series of one family; holds no series state (the caches are passed in)."""

    def __init__(self, family: catalog.Family, style: Style) -> None:
        self.family = family
        self.style = style
        self.header = self._header()
        self.labelnames = family.labels + family.optional_labels
        self.drop_empty = bool(family.optional_labels)
        # What the kept prefixes depend on besides the label key: lets styles writing the same
        # bytes share one cache.
        self.naming = (sample_prefix(family.name, (), style), sample_prefix("a", (("b", "c"),), style),
                       family.passthrough)

    def _header(self) -> list[str]:
        family, style = self.family, self.style
        name, typ = family.name, family.type
        if typ == catalog.COUNTER:
            base = name[: -len("_total")]
        elif typ == catalog.INFO:
            base = name[: -len("_info")]
        else:
            base = name
        if style.openmetrics:
            shown, shown_type = base, typ
        else:
            shown = base + "_total" if typ == catalog.COUNTER else base + "_info" if typ == catalog.INFO else base
            shown_type = _PROMETHEUS_TYPE[typ]
        shown = family_name(shown, style)
        return [f"# HELP {shown} {help_text(family.help, style)}", f"# TYPE {shown} {shown_type}"]

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

    def lines(self, series: Mapping[Any, Any], cache: PrefixCache, out: list[str]) -> None:
        """Append the sample lines of one instance's series of this family to `out`."""
        if self.family.type != catalog.HISTOGRAM:
            keys = series.keys()
            try:
                values = go_floats(series.values())
            except TypeError:  # a Histogram among a passthrough family's values
                self._mixed_lines(series, cache, out)
                return
            out.extend(map(add, cache.lookup(keys, self.scalar_prefix), values))
            return
        self._mixed_lines(series, cache, out)

    def _mixed_lines(self, series: Mapping[Any, Any], cache: PrefixCache, out: list[str]) -> None:
        """Histograms, or a passthrough family mixing histograms and plain values: per series."""
        prefixes = cache.prefixes
        found = []
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
            found.append(prefix)
        cache.trim(series.keys(), found)
