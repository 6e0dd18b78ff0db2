"""Logging as logfmt-style text or one JSON object per line (`--log-format json`)."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD}


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        parts = [f"ts={ts}.{int(record.msecs):03d}Z", f"level={record.levelname.lower()}",
                 f"logger={record.name}", f"msg={json.dumps(record.getMessage())}"]
        parts += [f"{k}={json.dumps(v, default=str)}" for k, v in _extras(record).items()]
        if record.exc_info:
            parts.append(f"exc={json.dumps(self.formatException(record.exc_info))}")
        return " ".join(parts)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {"ts": record.created, "level": record.levelname.lower(), "logger": record.name,
               "msg": record.getMessage(), **_extras(record)}
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def setup(fmt: str = "text", level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiohttp's access log is noisy at one line per scrape.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


class RateLimiter:
    """At most one log line per key every `every` seconds, so a client that repeats a mistake
    thousands of times a second costs one line; the next line says how many were held back."""

    MAX_KEYS = 1024  # keys are kinds of events, a small set; this bounds a bug, not an attacker

    def __init__(self, every: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def allow(self, key: str) -> int | None:
        """None when this event should not be logged; else how many of this key were held back
        since the last line."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.every:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        if last is None and len(self._last) >= self.MAX_KEYS:
            self._last.clear()
            self._held.clear()
        self._last[key] = now
        return self._held.pop(key, 0)
