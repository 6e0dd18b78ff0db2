"""Names, label blocks and help text, escaped as prometheus_client's encoders escape them.

Written once per family or per series (then kept), so clarity matters more than speed here.
The quirks are prometheus_client's, kept on purpose for byte-identical output: OpenMetrics
sample names under the `underscores` escaping lose their colons, text format ones keep them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .style import ALLOW_UTF8, Style

_LEGACY_METRIC = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LEGACY_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def _label_rune(ch: str, i: int) -> bool:
    return ("a" <= ch <= "z") or ("A" <= ch <= "Z") or ch == "_" or ("0" <= ch <= "9" and i > 0)


def _metric_rune(ch: str, i: int) -> bool:
    return _label_rune(ch, i) or ch == ":"


def _underscored(s: str, metric: bool) -> str:
    rune = _metric_rune if metric else _label_rune
    return "".join(ch if rune(ch, i) else "_" for i, ch in enumerate(s))


def escape_value(value: str) -> str:
    """A label value (both formats, every escaping)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def is_legacy_metric_name(name: str) -> bool:
    return _LEGACY_METRIC.match(name) is not None


def family_name(name: str, style: Style) -> str:
    """A name in # HELP / # TYPE lines."""
    if not name:
        return name
    if style.escaping == ALLOW_UTF8:
        return name if is_legacy_metric_name(name) else f'"{escape_value(name)}"'
    return name if is_legacy_metric_name(name) else _underscored(name, metric=True)


def label_name(name: str, style: Style) -> str:
    if not name or _LEGACY_LABEL.match(name):
        return name
    if style.escaping == ALLOW_UTF8:
        return f'"{escape_value(name)}"'
    return _underscored(name, metric=False)


def _quoted_block_label(name: str, style: Style) -> str:
    if style.escaping == ALLOW_UTF8 and name.startswith("__"):
        return f'"{escape_value(name)}"'
    return label_name(name, style)


def help_text(doc: str, style: Style) -> str:
    if style.openmetrics:
        return escape_value(doc)
    return doc.replace("\\", r"\\").replace("\n", r"\n")


def sample_head(name: str, style: Style) -> tuple[str, bool]:
    """How a sample line starts: (name, quoted). Quoted names (UTF-8 escaping, a name outside
    the legacy set) go inside the braces: `{"name",labels}`."""
    if style.escaping == ALLOW_UTF8:
        if is_legacy_metric_name(name):
            return escape_value(name) if style.openmetrics else name, False
        return f'"{escape_value(name)}"', True
    if style.openmetrics:  # prometheus_client escapes OpenMetrics sample names with label runes
        return _underscored(name, metric=False), False
    return family_name(name, style), False


def label_block(pairs: Iterable[tuple[str, str]], style: Style) -> str:
    """The label block and the space before the value: `{a="x",b="y"} `, or ` ` without labels.
    `pairs` are the label (name, value) pairs, already sorted by name."""
    block = ",".join(f'{label_name(k, style)}="{escape_value(v)}"' for k, v in pairs)
    return f"{{{block}}} " if block else " "


def sample_prefix(name: str, pairs: Iterable[tuple[str, str]], style: Style) -> str:
    """Everything of a sample line before its value: `name{a="x",b="y"} `."""
    head, quoted = sample_head(name, style)
    if quoted:
        # Inside a quoted name's braces prometheus_client also quotes the reserved `__` names
        # (escape_label_name); after a legacy name it writes them bare (label_block).
        block = ",".join(f'{_quoted_block_label(k, style)}="{escape_value(v)}"' for k, v in pairs)
        return f"{{{head},{block}}} " if block else f"{{{head}}} "
    return head + label_block(pairs, style)
