"""The switch side from a Prometheus query API, for a node whose switches another infrapulse
instance (a fabric collector) reads: the switch ports whose LLDP neighbour is this host, their
PFC pause ratio, ECN-marked ratio, drops, flaps and queue depth in the before and since windows.

Only used when `inspect.switch_prometheus.url` is set and this daemon sees no facing switch port
itself. Each window is one instant query per value at the window's end over its length. The
bearer token is read from its file at query time and sent only to that API; neither it nor the
URL enters a report (a failure is a note naming the HTTP status or the error kind).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp

from ..health.signals import SIGNALS
from .compare import Finding, Windows, finding, rank
from .config import SwitchPrometheusSettings
from .sample import Meta, floor_of

LAYER = "network"
QUEUE_DEPTH_FLOOR = 256 * 1024


class QueryError(Exception):
    """A query that failed; the message never holds the URL or the token."""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def queries(hostname: str, seconds: int) -> dict[str, tuple[str, tuple[str, ...]]]:
    """value name -> (PromQL, the labels that name its target), each joined to the ports facing
    `hostname` through LLDP (neighbor_port comes along)."""
    facing = (f'max by (switch, interface, neighbor_port) '
              f'(infrapulse_switch_lldp_neighbor_info{{neighbor_system="{_escape(hostname)}"}})')
    join = f" * on (switch, interface) group_left (neighbor_port) {facing}"
    r = f"[{seconds}s]"
    return {
        "pfc_pause_ratio": (
            f'max by (switch, interface, priority) (rate(infrapulse_switch_pfc_pause_duration_seconds_total'
            f'{{direction="rx"}}{r})){join}', ("switch", "interface", "priority")),
        "ecn_marked_ratio": (
            f"(sum by (switch, interface, queue) (rate(infrapulse_switch_queue_ecn_marked_packets_total{r}))"
            f" / (sum by (switch, interface, queue) "
            f"(rate(infrapulse_switch_queue_transmitted_packets_total{r})) > 0)){join}",
            ("switch", "interface", "queue")),
        "queue_drop_rate": (
            f"sum by (switch, interface) (rate(infrapulse_switch_queue_dropped_packets_total{r})){join}",
            ("switch", "interface")),
        "link_flaps": (
            f"sum by (switch, interface) (increase(infrapulse_switch_interface_carrier_transitions_total{r}))"
            f"{join}", ("switch", "interface")),
        "queue_depth": (
            f"max by (switch, interface) (max_over_time(infrapulse_switch_queue_depth_bytes{r})){join}",
            ("switch", "interface")),
    }


def target_name(metric: str, labels: dict[str, str], hostname: str) -> str:
    base = f"{labels.get('switch', '')} {labels.get('interface', '')}"
    if metric == "pfc_pause_ratio":
        base += f" priority {labels.get('priority', '')} rx"
    elif metric == "ecn_marked_ratio":
        base += f" queue {labels.get('queue', '')}"
    return f"{base} (facing {hostname} {labels.get('neighbor_port', '')})"


def meta_for(metric: str, target: str) -> Meta:
    if metric in SIGNALS:
        sig = SIGNALS[metric]
        return Meta(LAYER, metric, target, sig.unit, floor_of(sig.good, sig.bad), good=sig.good)
    if metric == "queue_drop_rate":
        return Meta(LAYER, metric, target, "per_second", 1.0)
    return Meta(LAYER, metric, target, "bytes", QUEUE_DEPTH_FLOOR)


class SwitchSide:
    def __init__(self, config: SwitchPrometheusSettings, hostname: str) -> None:
        # Credentials in the URL (https://user:pass@host) become a basic-auth header; the URL
        # kept here has none.
        parts = urlsplit(config.url.rstrip("/"))
        self.basic = None
        if parts.username is not None:
            user, password = unquote(parts.username), unquote(parts.password or "")
            self.basic = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            host = parts.hostname or ""
            netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
            parts = parts._replace(netloc=netloc)
        self.url = urlunsplit(parts)
        self.token_file = config.bearer_token_file
        self.timeout = config.timeout
        self.hostname = hostname

    def headers(self) -> dict[str, str]:
        if self.basic is not None and self.token_file:
            raise QueryError("switch_prometheus: credentials in the URL and a bearer_token_file; give one")
        if self.basic is not None:
            return {"Authorization": self.basic}
        if not self.token_file:
            return {}
        try:
            token = Path(self.token_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise QueryError("cannot read switch_prometheus.bearer_token_file: "
                             f"{exc.strerror or type(exc).__name__}") from None
        return {"Authorization": f"Bearer {token}"}

    async def _query(self, session: aiohttp.ClientSession, promql: str, at: float) -> list[dict[str, Any]]:
        try:
            async with session.get(f"{self.url}/api/v1/query", params={"query": promql, "time": f"{at:.3f}"},
                                   headers=self.headers()) as resp:
                if resp.status != 200:
                    raise QueryError(f"HTTP {resp.status}")
                body = await resp.json(content_type=None)
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            raise QueryError(type(exc).__name__) from None
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict) or data.get("resultType") != "vector":
            raise QueryError("not an instant vector")
        return [r for r in data.get("result", []) if isinstance(r, dict)]

    async def window_values(self, session: aiohttp.ClientSession, window: tuple[float, float]
                            ) -> dict[tuple[str, str], float]:
        seconds = max(int(window[1] - window[0]), 1)
        out: dict[tuple[str, str], float] = {}
        for metric, (promql, _keys) in queries(self.hostname, seconds).items():
            for item in await self._query(session, promql, window[1]):
                labels = {k: str(v) for k, v in item.get("metric", {}).items()}
                try:
                    value = float(item["value"][1])
                except (KeyError, IndexError, TypeError, ValueError):
                    continue
                out[(metric, target_name(metric, labels, self.hostname))] = value
        return out

    async def findings(self, win: Windows) -> tuple[list[Finding], list[str]]:
        """Ranked findings of the facing switch ports, and notes (what failed, never a secret)."""
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session:
                before = await self.window_values(session, win.before)
                since = await self.window_values(session, win.since)
        except QueryError as exc:
            return [], [f"switch side from switch_prometheus: query failed ({exc})"]
        keys = sorted(set(before) | set(since))
        if not keys:
            return [], [f"switch side from switch_prometheus: no switch port has {self.hostname} as its "
                        "LLDP neighbour"]
        return rank(list(_findings(keys, before, since))), []


def _findings(keys: list[tuple[str, str]], before: dict[tuple[str, str], float],
              since: dict[tuple[str, str], float]) -> Iterator[Finding]:
    for metric, target in keys:
        yield finding(meta_for(metric, target), before.get((metric, target)), since.get((metric, target)))
