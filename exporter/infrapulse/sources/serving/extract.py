"""The extractor mini-language the per-engine rule tables (`normalize.MAPPINGS`) are written in.

An extractor reads one scrape's families and returns `{key: value}` for one target family,
key = (model, kept label values...) [+ (outcome,)], or None when its source family is absent.
Series that map to one key are merged: the lowest replica rank wins (tensor-parallel ranks
report the same numbers), others are summed (counters, histograms, counts) or maxed (ratios).
Histograms are summed on the bucket bounds common to all merged series (exact, never invented).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ... import catalog
from ...store import Histogram
from ...textparse import MetricFamily

# Accumulators: key -> value, key = (model, kept label values...) [+ (outcome,)]
Key = tuple[str, ...]


@dataclass(frozen=True)
class Context:
    """How one engine's labels map to a target key (built by `normalize.context_for`)."""

    model_label: str  # the engine's model label ("" when it has none: TGI)
    kept_sources: tuple[str, ...]  # the engine's names of the labels kept, in KEEPABLE order
    replicas: tuple[str, ...]  # replica-rank labels not kept: the lowest rank wins
    default_model: str = ""

    def split(self, labels: dict[str, str]) -> tuple[Key, tuple]:
        """(target key, replica-rank key) of one sample's labels."""
        model = labels.get(self.model_label, "") if self.model_label else ""
        key = (model or self.default_model,) + tuple(labels.get(src, "") for src in self.kept_sources)
        if not self.replicas:
            return key, ()
        return key, tuple(_rank(labels.get(r)) for r in self.replicas)


def _rank(text: str | None) -> float:
    if text is None or text == "":
        return -1.0
    try:
        return float(text)
    except ValueError:
        return math.inf


class _Merge:
    """Merge series into target keys: lowest replica rank wins, others combine (sum or max)."""

    __slots__ = ("combine", "best")

    def __init__(self, combine: str) -> None:
        self.combine = combine
        self.best: dict[Key, tuple[tuple, object]] = {}

    def add(self, key: Key, replica: tuple, value) -> None:
        current = self.best.get(key)
        if current is None or replica < current[0]:
            self.best[key] = (replica, value)
        elif replica == current[0]:
            self.best[key] = (replica, self._combine(current[1], value))

    def _combine(self, a, b):
        if isinstance(a, _HistAcc):
            a.merge(b)
            return a
        return a + b if self.combine == "sum" else max(a, b)

    def result(self) -> dict[Key, object]:
        return {k: v for k, (_, v) in self.best.items()}


class _HistAcc:
    """A histogram under construction: cumulative counts by bound, merged on common bounds."""

    __slots__ = ("buckets", "sum", "count", "series")

    def __init__(self) -> None:
        self.buckets: dict[float, float] = {}
        self.sum = 0.0
        self.count = 0.0
        self.series = 1

    def merge(self, other: _HistAcc) -> None:
        mine, theirs = self.buckets, other.buckets
        if mine.keys() == theirs.keys():  # the usual case: every rank has the same buckets
            for le, c in theirs.items():
                mine[le] += c
        else:
            self.buckets = {le: mine[le] + theirs[le] for le in mine.keys() & theirs.keys()}
        self.sum += other.sum
        self.count += other.count

    def histogram(self, scale: float) -> Histogram | None:
        if not self.buckets or math.inf not in self.buckets:
            return None
        bounds = sorted(self.buckets)
        return Histogram(tuple((le * scale if le != math.inf else le, self.buckets[le]) for le in bounds),
                         self.sum * scale, self.count)


Extractor = Callable[[dict[str, MetricFamily], Context], dict[Key, object] | None]


def hist(name: str, scale: float = 1.0) -> Extractor:
    """A histogram family, bounds and sum multiplied by `scale` (unit conversion)."""

    def extract(families, ctx):
        fam = families.get(name)
        if fam is None or fam.type not in ("histogram", "untyped", "unknown"):
            return None
        accs: dict[tuple, _HistAcc] = {}
        bucket, total, count = name + "_bucket", name + "_sum", name + "_count"
        for s in fam.samples:
            labels = s.labels
            # Series identity without `le`. Label order is stable within one writer's output
            # (prometheus_client appends le, Go sorts all names), so no sorting is needed.
            if s.name == bucket:
                le = labels.get("le")
                if le is None:
                    continue
                ident = tuple([kv for kv in labels.items() if kv[0] != "le"])
            elif s.name == total or s.name == count:
                ident = tuple(labels.items())
            else:
                continue
            acc = accs.get(ident)
            if acc is None:
                acc = accs[ident] = _HistAcc()
            if s.name == bucket:
                try:
                    acc.buckets[float(le)] = s.value
                except ValueError:
                    continue
            elif s.name == total:
                acc.sum = s.value
            else:
                acc.count = s.value
        if not accs:
            return None
        merge = _Merge("sum")
        for ident, acc in accs.items():
            key, replica = ctx.split(dict(ident))
            merge.add(key, replica, acc)
        out = {}
        for key, acc in merge.result().items():
            h = acc.histogram(scale)
            if h is not None:
                out[key] = h
        return out

    return extract


def hist_sum(name: str, scale: float = 1.0, part: str = "_sum") -> Extractor:
    """The `_sum` (or `_count`) of a histogram as a counter (TGI tokens, NIXL bytes)."""

    def extract(families, ctx):
        fam = families.get(name)
        if fam is None or fam.type not in ("histogram", "summary", "untyped", "unknown"):
            return None
        return _scalar(fam, name + part, ctx, "sum", scale)

    return extract


def counter(name: str, scale: float = 1.0, where: dict[str, str] | None = None) -> Extractor:
    def extract(families, ctx):
        fam = families.get(name)
        if fam is None or fam.type not in ("counter", "untyped", "unknown"):
            return None
        wanted = (name + "_total", name)
        return _scalar(fam, wanted, ctx, "sum", scale, where)

    return extract


def gauge(name: str, scale: float = 1.0, where: dict[str, str] | None = None, combine: str = "sum",
          types: tuple[str, ...] = ("gauge", "untyped", "unknown")) -> Extractor:
    def extract(families, ctx):
        fam = families.get(name)
        if fam is None or fam.type not in types:
            return None
        return _scalar(fam, name, ctx, combine, scale, where)

    return extract


def ratio(numerator: Extractor, denominator: Extractor) -> Extractor:
    """numerator / denominator per key (TRT-LLM used / max KV blocks)."""

    def extract(families, ctx):
        num, den = numerator(families, ctx), denominator(families, ctx)
        if not num or not den:
            return None
        out = {k: num[k] / den[k] for k in num if den.get(k)}
        return out or None

    return extract


def difference(minuend: Extractor, subtrahend: Extractor) -> Extractor:
    """minuend - subtrahend per key, floored at 0 (all requests minus failed/aborted)."""

    def extract(families, ctx):
        a = minuend(families, ctx)
        if a is None:
            return None
        b = subtrahend(families, ctx) or {}
        return {k: max(0.0, v - b.get(k, 0.0)) for k, v in a.items()}

    return extract


def total(*parts: Extractor) -> Extractor:
    """Sum of several extractors (failures of several kinds); None if none is present."""

    def extract(families, ctx):
        out: dict[Key, float] = {}
        found = False
        for part in parts:
            values = part(families, ctx)
            if values is None:
                continue
            found = True
            for k, v in values.items():
                out[k] = out.get(k, 0.0) + v
        return out if found else None

    return extract


def by_label(name: str, label: str, outcomes: dict[str, str], default: str = "success") -> Extractor:
    """A counter split by a reason label, mapped to outcomes (the outcome is appended to the key)."""

    def extract(families, ctx):
        fam = families.get(name)
        if fam is None or fam.type not in ("counter", "untyped", "unknown"):
            return None
        merge = _Merge("sum")
        wanted = (name + "_total", name)
        for s in fam.samples:
            if s.name not in wanted:
                continue
            key, replica = ctx.split(s.labels)
            outcome = outcomes.get(s.labels.get(label, ""), default)
            merge.add(key + (outcome,), replica, s.value)
        return merge.result()

    return extract


def when_present(name: str, extractor: Extractor) -> Extractor:
    """Use `extractor` only if family `name` exists (SGLang: prompt tokens count as prefix-cache
    queries only where cached-token counters exist to pair them with)."""

    def extract(families, ctx):
        return extractor(families, ctx) if name in families else None

    return extract


def with_outcome(outcome: str, extractor: Extractor) -> Extractor:
    def extract(families, ctx):
        values = extractor(families, ctx)
        if values is None:
            return None
        return {k + (outcome,): v for k, v in values.items()}

    return extract


def _scalar(fam: MetricFamily, names, ctx: Context, combine: str, scale: float,
            where: dict[str, str] | None = None) -> dict[Key, float] | None:
    if isinstance(names, str):
        names = (names,)
    merge = _Merge(combine)
    found = False
    for s in fam.samples:
        if s.name not in names:
            continue
        labels = s.labels
        if where and any(labels.get(k) != v for k, v in where.items()):
            continue
        found = True
        key, replica = ctx.split(labels)
        merge.add(key, replica, s.value * scale)
    return merge.result() if found else None

@dataclass(frozen=True)
class Rule:
    family: catalog.Family
    alternatives: tuple[Extractor, ...]
    fallback_only: catalog.Family | None = None  # emit only when this family produced nothing

