"""PromQL building blocks for the dashboards.

Every selector carries the dashboard's variable matchers (`job=~"$job"`, ...), every counter is
read through rate()/increase() over `$__rate_interval`, and ratios are built by summing
numerator and denominator separately before dividing (never averaging a ratio).
"""

from __future__ import annotations

RATE_INTERVAL = "$__rate_interval"

# The matchers most panels apply: the job and instance variables (multi-select, All = ".+").
SCOPE = {"job": "$job", "instance": "$instance"}


def sel(metric: str, scope: dict[str, str] | None = None, **extra: str) -> str:
    """`metric{job=~"$job", ...}`; values in `extra` starting with '=' or '!' set the operator."""
    matchers = [f'{name}=~"{value}"' for name, value in (SCOPE if scope is None else scope).items()]
    for name, value in extra.items():
        if value[:2] in ("!=", "!~", "=~"):
            matchers.append(f'{name}{value[:2]}"{value[2:]}"')
        elif value.startswith("="):
            matchers.append(f'{name}="{value[1:]}"')
        else:
            matchers.append(f'{name}=~"{value}"')
    return f"{metric}{{{', '.join(matchers)}}}"


def rate(selector: str, window: str = RATE_INTERVAL) -> str:
    return f"rate({selector}[{window}])"


def increase(selector: str, window: str) -> str:
    return f"increase({selector}[{window}])"


def by(labels: str, expr: str, op: str = "sum") -> str:
    """`sum by (a, b) (expr)`; labels is a comma-separated string."""
    return f"{op} by ({labels}) ({expr})"


def ratio(numerator: str, denominator: str, labels: str) -> str:
    """sum(rate(num)) / sum(rate(den)) by the same labels."""
    return f"{by(labels, rate(numerator))}\n/\n{by(labels, rate(denominator))}"


def quantile(q: float, histogram: str, labels: str, scope: dict[str, str] | None = None, **extra: str) -> str:
    """histogram_quantile over a classic histogram's buckets, aggregated by `labels` (plus le)."""
    buckets = rate(sel(f"{histogram}_bucket", scope, **extra))
    return f"histogram_quantile({q:g}, sum by (le, {labels}) ({buckets}))"
