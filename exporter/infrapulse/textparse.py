"""A fast, lenient parser for the Prometheus text format (0.0.4) and OpenMetrics 1.0.

Why not `prometheus_client.parser`: it walks label strings character by character in
Python, which costs tens of milliseconds for one 2,000-line engine exposition — scraped every
few seconds per endpoint. This parser does each line with two C-level regex passes and keeps
the same family grouping rules as prometheus_client (a test compares both on every fixture):

* a `# TYPE`/`# HELP` line opens a family; samples whose name is the family name plus a
  suffix allowed for its type (`_bucket`, `_sum`, `_count`, `_total`, `_created`, ...) join it;
* any other sample is an `untyped` family of its own name (merged if the name repeats);
* a counter family is named without `_total` (the OpenMetrics convention prometheus_client
  also uses for the text format). Sample names stay exactly as exposed: unlike
  prometheus_client we do not append `_total` to a text-format counter sample that lacks it
  (Triton's `nv_inference_request_success`), so passthrough re-exposes the same names.

* samples written with ':' escaped to '_' under a `# TYPE` that kept the ':' (what
  prometheus_client's OpenMetrics encoder does to `vllm:` names) get the declared name back.

`parse()` returns `{family name: MetricFamily}` in exposition order. Anything that is not
the format (HTML, JSON, a truncated line, a bad number) raises `ParseError` naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple


class Sample(NamedTuple):
    name: str
    labels: dict[str, str]  # shared by nobody else, but treat as read-only
    value: float
    timestamp: float | None = None  # seconds


@dataclass
class MetricFamily:
    name: str
    type: str = "untyped"  # counter gauge histogram summary info stateset gaugehistogram unknown untyped
    help: str = ""
    unit: str = ""
    samples: list[Sample] = field(default_factory=list)


class ParseError(ValueError):
    """The body is not the exposition format. `reason` is a short code for source status."""

    def __init__(self, lineno: int, message: str, reason: str = "not_prometheus") -> None:
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno
        self.reason = reason


_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_QUOTED = r'"[^"\\]*(?:\\.[^"\\]*)*"'
# name, optional {labels} (quoted values may contain '}' or ','), value, optional timestamp,
# optional OpenMetrics exemplar (ignored).
_SAMPLE = re.compile(
    rf"({_NAME})[ \t]*(?:\{{((?:[^\"}}]*{_QUOTED})*[^\"}}]*)\}})?"
    r"[ \t]*([^ \t#]+)(?:[ \t]+([^ \t#]+))?[ \t]*(?:#.*)?"
)
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"([^"\\]*(?:\\.[^"\\]*)*)"')
_LABEL_PAIR = rf"[a-zA-Z_][a-zA-Z0-9_]*[ \t]*=[ \t]*{_QUOTED}[ \t]*"
_LABELS_FULL = re.compile(rf"[ \t]*(?:{_LABEL_PAIR}(?:,[ \t]*{_LABEL_PAIR})*,?[ \t]*)?")
_ESCAPE = re.compile(r"\\(.)")
_ESCAPES = {"n": "\n", "\\": "\\", '"': '"'}
_VALID_NAME = re.compile(_NAME)

# Sample-name suffixes a family of each type owns (OpenMetrics set, also accepted in text).
_SUFFIXES: dict[str, tuple[str, ...]] = {
    "counter": ("_total", "_created", ""),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
}
_TYPES = {"counter", "gauge", "histogram", "summary", "untyped", "unknown", "info", "stateset",
          "gaugehistogram"}


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), text)


def parse_labels(text: str, lineno: int = 0) -> dict[str, str]:
    """`a="1",b="x\\"y"` -> {"a": "1", "b": 'x"y'}."""
    if not _LABELS_FULL.fullmatch(text):
        raise ParseError(lineno, f"malformed labels {{{text[:80]}}}")
    pairs = _LABEL.findall(text)
    if "\\" in text:
        return {k: _unescape(v) for k, v in pairs}
    return dict(pairs)


def _family_name(name: str, typ: str) -> str:
    if typ == "counter" and name.endswith("_total"):
        return name[:-6]
    if typ == "info" and name.endswith("_info"):
        return name[:-5]
    return name


LABEL_CACHE_LIMIT = 200_000


class ParseCache:
    """What `parse` keeps between scrapes of one target (the caller holds one per URL).

    `heads` maps the text of a sample line before its value (`name{labels}`) to the sample name
    and parsed labels: an engine prints the same heads every scrape, so in steady state a line
    costs one `rfind`, one dict lookup and one `float` — no regex, no label parsing. Only heads
    of lines without a timestamp are cached (with one, the text before the last blank holds the
    value). `labels` maps raw label text to its dict (heads that changed reuse their labels).
    Both are bounded by LABEL_CACHE_LIMIT; cached dicts are shared: never mutate them.
    """

    __slots__ = ("heads", "labels")

    def __init__(self) -> None:
        self.heads: dict[str, tuple[str, dict[str, str]]] = {}
        self.labels: dict[str, dict[str, str]] = {}


def parse(text: str, openmetrics: bool = False,
          label_cache: ParseCache | dict[str, dict[str, str]] | None = None) -> dict[str, MetricFamily]:
    """Parse an exposition into families keyed by name (see the module docstring).

    `label_cache` (kept by the caller between scrapes of the same target): a `ParseCache`
    (line heads and labels), or a plain dict mapping raw label text to its parsed dict. An
    engine repeats the same label strings every scrape, so steady state skips label parsing.
    Cached dicts are shared between samples: never mutate them.
    """
    if isinstance(label_cache, ParseCache):
        heads: dict[str, tuple[str, dict[str, str]]] | None = label_cache.heads
        label_cache = label_cache.labels
    else:
        heads = None
    head_of = heads.get if heads is not None else _NO_HEADS.get
    families: dict[str, MetricFamily] = {}
    untyped = "unknown" if openmetrics else "untyped"  # what each format calls a family without TYPE
    current: MetricFamily | None = None
    samples: list[Sample] = []  # current.samples
    owned: frozenset[str] = frozenset()  # sample names the current family owns (empty: no family yet)
    escaped: dict[str, str] = {}
    sample_match = _SAMPLE.fullmatch
    new_sample = tuple.__new__  # Sample(...) without the NamedTuple __new__ call: ~40% cheaper
    saw_eof = False
    lineno = 0
    lines = text.split("\n")
    for lineno, line in enumerate(lines, 1):
        # Fast path (steady state): the head before the last blank was cached by an earlier
        # scrape. Anything unusual (a '#' or tab in the value, a bad number) takes the full path.
        cut = line.rfind(" ")
        hit = head_of(line[:cut]) if cut > 0 else None
        if hit is not None:
            value_text = line[cut + 1:]
            if "#" not in value_text:
                try:
                    value = float(value_text)
                except ValueError:
                    pass
                else:
                    name, labels = hit
                    if escaped and name in escaped:
                        name = escaped[name]
                    if name not in owned:
                        current, owned, escaped = _untyped_family(families, name, untyped)
                        samples = current.samples
                    samples.append(new_sample(Sample, (name, labels, value, None)))
                    continue
        line = line.strip()
        if not line:
            continue
        if line[0] == "#":
            parts = line.split(None, 3)
            if len(parts) < 2:
                continue
            keyword = parts[1]
            if keyword == "EOF" and len(parts) == 2:
                saw_eof = True
                for later, rest_line in enumerate(lines[lineno:], lineno + 1):
                    if rest_line.strip():
                        raise ParseError(later, "content after # EOF")
                break
            if keyword not in ("TYPE", "HELP", "UNIT") or len(parts) < 3:
                continue  # a plain comment
            raw_name = parts[2]
            if not _VALID_NAME.fullmatch(raw_name):
                raise ParseError(lineno, f"invalid metric name {raw_name[:80]!r}")
            rest = parts[3] if len(parts) == 4 else ""
            if keyword == "TYPE":
                typ = rest.strip().lower()
                if typ not in _TYPES:
                    raise ParseError(lineno, f"unknown metric type {rest[:40]!r}")
                name = _family_name(raw_name, typ)
                if current is None or current.name not in (name, raw_name):
                    current = families.get(name) or MetricFamily(name, typ)
                    families[name] = current
                elif current.name != name:  # HELP x_total came first, TYPE renames it to x
                    del families[current.name]
                    current.name = name
                    families[name] = current
                current.type = typ
                samples = current.samples
                suffixes = _SUFFIXES.get(typ, ("",))
                owned = frozenset(name + s for s in suffixes)
                # prometheus_client's OpenMetrics encoder writes `# TYPE vllm:x` but samples
                # `vllm_x_total`: map the escaped sample names back to the declared ones.
                escaped = {(name + s).replace(":", "_"): name + s for s in suffixes} if ":" in name else {}
            else:
                if current is None or current.name != raw_name:
                    current = families.get(raw_name) or MetricFamily(raw_name, untyped)
                    families[raw_name] = current
                    samples = current.samples
                    owned = frozenset((raw_name,))
                    escaped = {}
                if keyword == "HELP":
                    current.help = _unescape(rest) if "\\" in rest else rest
                else:
                    current.unit = rest
            continue
        match = sample_match(line)
        if match is None:
            raise ParseError(lineno, f"not a sample line: {line[:80]!r}")
        name, label_text, value_text, ts_text = match.groups()
        try:
            value = float(value_text)
            timestamp = None
            if ts_text is not None:
                timestamp = float(ts_text) if openmetrics else int(ts_text) / 1000.0
        except ValueError:
            raise ParseError(lineno, f"bad number in {line[:80]!r}") from None
        if not label_text:
            labels = {}
        elif label_cache is None:
            labels = parse_labels(label_text, lineno)
        else:
            cached = label_cache.get(label_text)
            if cached is None:
                cached = parse_labels(label_text, lineno)
                if len(label_cache) >= LABEL_CACHE_LIMIT:
                    label_cache.clear()  # bounded: a target with churning labels cannot grow it
                label_cache[label_text] = cached
            labels = cached
        # Remember the head of a `head value` line: the same head with any other value token
        # (no blank, tab or '#') parses to the same name and labels. Not with a '#' anywhere
        # (an exemplar's value would pose as the sample's) or a timestamp.
        if heads is not None and ts_text is None and "#" not in line and line.endswith(" " + value_text):
            if len(heads) >= LABEL_CACHE_LIMIT:
                heads.clear()
            heads[line[:len(line) - len(value_text) - 1]] = (name, labels)
        if escaped and name in escaped:
            name = escaped[name]
        if name not in owned:
            current, owned, escaped = _untyped_family(families, name, untyped)
            samples = current.samples
        samples.append(new_sample(Sample, (name, labels, value, timestamp)))
    if openmetrics and not saw_eof:
        raise ParseError(lineno, "OpenMetrics body without # EOF (truncated?)", reason="truncated")
    return families


_NO_HEADS: dict[str, tuple[str, dict[str, str]]] = {}


def _untyped_family(families: dict[str, MetricFamily], name: str,
                    untyped: str) -> tuple[MetricFamily, frozenset[str], dict[str, str]]:
    """The family a sample outside the current family joins: its own name's (merged if the name
    repeats), `untyped` when new. Returns (family, the names it owns, no escaped names)."""
    family = families.get(name)
    if family is None:
        family = families[name] = MetricFamily(name, untyped)
    return family, frozenset((name,)), {}


def typed_from_names(families: dict[str, MetricFamily]) -> dict[str, MetricFamily]:
    """Families an exposition left without `# TYPE` (trtllm-serve as pasted in TensorRT-LLM's
    own PR), typed by their names the way Prometheus reads them: untyped `X_bucket` (every sample
    with `le`) + `X_sum` + `X_count` are histogram `X`; untyped `X_total` is counter `X`. A name
    that a typed family already has is left alone. Returns `families` itself when nothing needs
    it (the common case: one pass over the names)."""
    untyped = {n for n, f in families.items() if f.type in ("untyped", "unknown")}
    if not untyped:
        return families
    merged: dict[str, MetricFamily] = {}
    taken: set[str] = set()
    for name in untyped:
        if name.endswith("_bucket"):
            base = name[:-7]
            buckets = families[name].samples
            if base in families or not buckets or any("le" not in s.labels for s in buckets):
                continue
            parts = [n for n in (name, base + "_sum", base + "_count") if n in untyped]
            merged[base] = MetricFamily(base, "histogram", families[name].help,
                                        samples=[s for n in parts for s in families[n].samples])
            taken.update(parts)
    for name in untyped - taken:
        base = name[:-6]
        if name.endswith("_total") and base not in families and base not in merged:
            merged[base] = MetricFamily(base, "counter", families[name].help,
                                        samples=list(families[name].samples))
            taken.add(name)
    if not merged:
        return families
    out = {n: f for n, f in families.items() if n not in taken}
    out.update(merged)
    return out


__all__ = ["MetricFamily", "ParseCache", "ParseError", "Sample", "parse", "parse_labels", "typed_from_names"]
