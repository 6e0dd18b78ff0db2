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
from dataclasses import dataclass, field

from ... import catalog
from ...store import Histogram
from ...textparse import MetricFamily

# A target key: (model, kept label values...) [+ (outcome,)]
Key = tuple[str, ...]
Families = dict[str, MetricFamily]
Value = float | Histogram
Values = dict[Key, Value]
Replica = tuple[float, ...]


# Per-series memos kept between scrapes hold at most this many entries beyond twice the series
# of the current scrape: label dicts that are not shared across scrapes (a caller parsing without
# a ParseCache, or churning labels) do not pile up.
MEMO_SLACK = 1_000


@dataclass(frozen=True)
class Context:
    """How one engine's labels map to a target key (built by `normalize.context_for`, which hands
    out one Context per label plan so that its memo lives across scrapes)."""

    model_label: str  # the engine's model label ("" when it has none: TGI)
    kept_sources: tuple[str, ...]  # the engine's names of the labels kept, in KEEPABLE order
    replicas: tuple[str, ...]  # replica-rank labels not kept: the lowest rank wins
    default_model: str = ""
    # id(labels) -> (labels, split): textparse shares one label dict per label text across
    # samples and scrapes, so a series is split once; holding `labels` keeps its id unique.
    _memo: dict[int, tuple[object, tuple[Key, Replica]]] = field(
        default_factory=dict, compare=False, hash=False, repr=False)

    def split(self, labels: dict[str, str]) -> tuple[Key, Replica]:
        """(target key, replica-rank key) of one sample's labels."""
        memo = self._memo
        hit = memo.get(id(labels))
        if hit is not None and hit[0] is labels:
            return hit[1]
        result = memo[id(labels)] = (labels, self._split(labels))
        return result[1]

    def split_items(self, ident: tuple[tuple[str, str], ...]) -> tuple[Key, Replica]:
        """`split` of the labels given as (name, value) pairs (a histogram series without `le`)."""
        memo = self._memo
        hit = memo.get(id(ident))
        if hit is not None and hit[0] is ident:
            return hit[1]
        result = memo[id(ident)] = (ident, self._split(dict(ident)))
        return result[1]

    def trim(self, live: int) -> None:
        """Forget the memo when it holds far more than the `live` series of this scrape."""
        if len(self._memo) > 2 * live + MEMO_SLACK:
            self._memo.clear()

    def _split(self, labels: dict[str, str]) -> tuple[Key, Replica]:
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


class _HistAcc:
    """A histogram under construction: cumulative counts by bound, merged on common bounds."""

    __slots__ = ("buckets", "sum", "count")

    def __init__(self) -> None:
        self.buckets: dict[float, float] = {}
        self.sum = 0.0
        self.count = 0.0

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
        """The finished histogram, or None without a +Inf bucket (a truncated exposition)."""
        if not self.buckets or math.inf not in self.buckets:
            return None
        bounds = sorted(self.buckets)
        return Histogram(tuple((le * scale if le != math.inf else le, self.buckets[le]) for le in bounds),
                         self.sum * scale, self.count)


class _Merge:
    """Merge scalar series into target keys: lowest replica rank wins, others combine (sum or max)."""

    __slots__ = ("combine", "best")

    def __init__(self, combine: str) -> None:
        self.combine = combine
        self.best: dict[Key, tuple[Replica, float]] = {}

    def add(self, key: Key, replica: Replica, value: float) -> None:
        current = self.best.get(key)
        if current is None or replica < current[0]:
            self.best[key] = (replica, value)
        elif replica == current[0]:
            old = current[1]
            self.best[key] = (replica, old + value if self.combine == "sum" else max(old, value))

    def result(self) -> Values:
        return {k: v for k, (_, v) in self.best.items()}


class _HistMerge:
    """Like _Merge, for histograms: same-rank series are summed on their common bounds."""

    __slots__ = ("best",)

    def __init__(self) -> None:
        self.best: dict[Key, tuple[Replica, _HistAcc]] = {}

    def add(self, key: Key, replica: Replica, acc: _HistAcc) -> None:
        current = self.best.get(key)
        if current is None or replica < current[0]:
            self.best[key] = (replica, acc)
        elif replica == current[0]:
            current[1].merge(acc)


@dataclass(frozen=True)
class Extractor:
    """One way to compute a target family from one scrape: `{key: value}`, or None when the engine
    family it reads is absent. `reads` names those engine families (what the mapping consumes)."""

    run: Callable[[Families, Context], Values | None]
    reads: frozenset[str]

    def __call__(self, families: Families, ctx: Context) -> Values | None:
        return self.run(families, ctx)


def _reads(*parts: Extractor) -> frozenset[str]:
    return frozenset().union(*(p.reads for p in parts))


def hist(name: str, scale: float = 1.0) -> Extractor:
    """A histogram family, bounds and sum multiplied by `scale` (unit conversion)."""

    # id(labels) -> (labels, series identity without `le`, le as a number or None): label dicts
    # are shared across scrapes (textparse), so each series' identity is built once.
    idents: dict[int, tuple[dict[str, str], tuple[tuple[str, str], ...], float | None]] = {}

    def identity(labels: dict[str, str]) -> tuple[tuple[tuple[str, str], ...], float | None]:
        hit = idents.get(id(labels))
        if hit is not None and hit[0] is labels:
            return hit[1], hit[2]
        # Label order is stable within one writer's output (prometheus_client appends le, Go
        # sorts all names), so no sorting is needed.
        le_text = labels.get("le")
        le: float | None = None
        if le_text is not None:
            try:
                le = float(le_text)
            except ValueError:
                le = math.nan  # a bucket whose bound is not a number: skipped
        ident = tuple([kv for kv in labels.items() if kv[0] != "le"])
        idents[id(labels)] = (labels, ident, le)
        return ident, le

    def extract(families: Families, ctx: Context) -> Values | None:
        fam = families.get(name)
        if fam is None or fam.type not in ("histogram", "untyped", "unknown"):
            return None
        if len(idents) > 2 * len(fam.samples) + MEMO_SLACK:
            idents.clear()
        accs: dict[tuple[tuple[str, str], ...], _HistAcc] = {}
        bucket, total, count = name + "_bucket", name + "_sum", name + "_count"
        for s in fam.samples:
            sample_name = s.name
            if sample_name == bucket:
                ident, le = identity(s.labels)
                if le is None or le != le:  # no `le`, or not a number
                    continue
            elif sample_name == total or sample_name == count:
                ident, le = identity(s.labels)
                if le is not None:
                    ident = tuple(s.labels.items())  # an `le` on a _sum/_count is part of its identity
            else:
                continue
            acc = accs.get(ident)
            if acc is None:
                acc = accs[ident] = _HistAcc()
            if sample_name == bucket:
                acc.buckets[le] = s.value  # type: ignore[index]
            elif sample_name == total:
                acc.sum = s.value
            else:
                acc.count = s.value
        if not accs:
            return None
        merge = _HistMerge()
        for ident, acc in accs.items():
            key, replica = ctx.split_items(ident)
            merge.add(key, replica, acc)
        out: Values = {}
        for key, (_, merged) in merge.best.items():
            h = merged.histogram(scale)
            if h is not None:
                out[key] = h
        return out

    return Extractor(extract, frozenset({name}))


def hist_sum(name: str, scale: float = 1.0, part: str = "_sum") -> Extractor:
    """The `_sum` (or `_count`) of a histogram as a counter (TGI tokens, NIXL bytes)."""

    def extract(families: Families, ctx: Context) -> Values | None:
        fam = families.get(name)
        if fam is None or fam.type not in ("histogram", "summary", "untyped", "unknown"):
            return None
        return _scalar(fam, (name + part,), ctx, "sum", scale)

    return Extractor(extract, frozenset({name}))


def counter(name: str, scale: float = 1.0, where: dict[str, str] | None = None) -> Extractor:
    def extract(families: Families, ctx: Context) -> Values | None:
        fam = families.get(name)
        if fam is None or fam.type not in ("counter", "untyped", "unknown"):
            return None
        return _scalar(fam, (name + "_total", name), ctx, "sum", scale, where)

    return Extractor(extract, frozenset({name}))


def gauge(name: str, scale: float = 1.0, where: dict[str, str] | None = None, combine: str = "sum",
          types: tuple[str, ...] = ("gauge", "untyped", "unknown")) -> Extractor:
    def extract(families: Families, ctx: Context) -> Values | None:
        fam = families.get(name)
        if fam is None or fam.type not in types:
            return None
        return _scalar(fam, (name,), ctx, combine, scale, where)

    return Extractor(extract, frozenset({name}))


def ratio(numerator: Extractor, denominator: Extractor) -> Extractor:
    """numerator / denominator per key (TRT-LLM used / max KV blocks)."""

    def extract(families: Families, ctx: Context) -> Values | None:
        num, den = numerator(families, ctx), denominator(families, ctx)
        if not num or not den:
            return None
        out: Values = {k: _num(num[k]) / _num(den[k]) for k in num if den.get(k)}
        return out or None

    return Extractor(extract, _reads(numerator, denominator))


def difference(minuend: Extractor, subtrahend: Extractor) -> Extractor:
    """minuend - subtrahend per key, floored at 0 (all requests minus failed/aborted)."""

    def extract(families: Families, ctx: Context) -> Values | None:
        a = minuend(families, ctx)
        if a is None:
            return None
        b = subtrahend(families, ctx) or {}
        return {k: max(0.0, _num(v) - _num(b.get(k, 0.0))) for k, v in a.items()}

    return Extractor(extract, _reads(minuend, subtrahend))


def total(*parts: Extractor) -> Extractor:
    """Sum of several extractors (failures of several kinds); None if none is present."""

    def extract(families: Families, ctx: Context) -> Values | None:
        out: Values = {}
        found = False
        for part in parts:
            values = part(families, ctx)
            if values is None:
                continue
            found = True
            for k, v in values.items():
                out[k] = _num(out.get(k, 0.0)) + _num(v)
        return out if found else None

    return Extractor(extract, _reads(*parts))


def by_label(name: str, label: str, outcomes: dict[str, str], default: str = "success") -> Extractor:
    """A counter split by a reason label, mapped to outcomes (the outcome is appended to the key)."""

    def extract(families: Families, ctx: Context) -> Values | None:
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

    return Extractor(extract, frozenset({name}))


def when_present(name: str, extractor: Extractor) -> Extractor:
    """Use `extractor` only if family `name` exists (SGLang: prompt tokens count as prefix-cache
    queries only where cached-token counters exist to pair them with)."""

    def extract(families: Families, ctx: Context) -> Values | None:
        return extractor(families, ctx) if name in families else None

    return Extractor(extract, extractor.reads)


def with_outcome(outcome: str, extractor: Extractor) -> Extractor:
    def extract(families: Families, ctx: Context) -> Values | None:
        values = extractor(families, ctx)
        if values is None:
            return None
        return {k + (outcome,): v for k, v in values.items()}

    return Extractor(extract, extractor.reads)


def _num(value: Value) -> float:
    if isinstance(value, Histogram):  # a rule combining histograms arithmetically is a bug
        raise TypeError("arithmetic on a histogram value")
    return value


def _scalar(fam: MetricFamily, names: tuple[str, ...], ctx: Context, combine: str, scale: float,
            where: dict[str, str] | None = None) -> Values | None:
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
    """A target family and the ways to compute it, newest engine version first (first present wins).

    `promised`: every version of the engine that infrapulse supports exposes it, so its absence
    on a live endpoint is reported (coverage 0) rather than taken as "not this version"."""

    family: catalog.Family
    alternatives: tuple[Extractor, ...]
    fallback_only: catalog.Family | None = None  # emit only when this family produced nothing
    promised: bool = False
