"""Scrape a Prometheus `/metrics` endpoint over HTTP(S) and parse it into families.

Shared by every source that reads another exporter (serving engines, dcgm-exporter). The API:

    scraper = Scraper()                                  # one per source; owns a connection pool
    target = ScrapeTarget(url="http://10.0.0.5:8000/metrics", timeout=4.0,
                          bearer_token_file="/var/run/secrets/token", headers_env="VLLM_HEADERS",
                          max_bytes=16 << 20, retries=1)
    try:
        result = await scraper.scrape(target)            # ScrapeResult
        result.families["vllm:num_requests_running"].samples  # -> [Sample(name, labels, value, ts)]
    except ScrapeError as exc:
        exc.reason, exc.message                          # "timeout", "http_500", ... (no secrets)
    await scraper.close()

`scraper.fetch(target)` returns the decoded body without parsing (`FetchResult`), and
`infrapulse.textparse.parse(text, openmetrics)` parses a body you already have.

Failure reasons (`ScrapeError.reason`), short and stable for `infrapulse_source_status_info`:
    timeout             no complete response within `timeout` seconds
    connection_refused  nothing listens on the port
    connection_failed   other connect errors (unreachable host, ...)
    dns                 the host name does not resolve
    tls                 certificate verification or handshake failed
    reset               the peer closed or reset the connection mid-response
    http_<code>         non-2xx status (http_401, http_404, http_500, ...)
    too_large           the body exceeded `max_bytes` (it is cut there, never buffered whole)
    not_prometheus      HTML, JSON or anything else that is not the exposition format
    truncated           an OpenMetrics body without `# EOF`
    bad_url             the URL cannot be used
    credentials         the bearer-token file or headers env var is missing or malformed

Behaviour worth knowing:
* TLS is verified by default (system CAs, or `ca_file`); `tls_insecure_skip_verify` exists
  for labs and is logged by the caller, never silently assumed.
* The bearer token file is re-read when its mtime changes (projected Kubernetes tokens rotate).
  `headers_env` names an env var holding extra headers, either a JSON object or
  `Name: value` lines. Tokens and header values never appear in messages or logs; URLs in
  messages have their user-info and query string removed.
* Retries (`retries`, default 1) use `infrapulse.backoff.Backoff` and happen only for
  transient failures (reset, 502/503/504) and only while the caller's `deadline` allows.
  A stale keep-alive connection closed by the server between scrapes is the common case.
* The body size is bounded after decompression, so a gzip bomb is cut like an endless body.
* Bodies over `PARSE_IN_THREAD_BYTES` are parsed in a worker thread to keep the loop free.
* Parsed label dicts are cached per URL across scrapes and shared: treat `Sample.labels` as
  read-only (copy before changing).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from .backoff import Backoff
from .textparse import MetricFamily, ParseCache, ParseError, Sample, parse

DEFAULT_ACCEPT = ("text/plain;version=0.0.4;q=1.0,application/openmetrics-text;version=1.0.0;q=0.5,"
                  "*/*;q=0.1")
DEFAULT_MAX_BYTES = 32 << 20
PARSE_IN_THREAD_BYTES = 1 << 20
TRANSIENT_REASONS = frozenset({"reset", "http_502", "http_503", "http_504"})
_CHUNK = 64 << 10


class ScrapeError(Exception):
    """A failed scrape. `reason` is a short code (see the module docstring); `message` is
    human detail without secrets."""

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(f"{reason}: {message}" if message else reason)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class ScrapeTarget:
    url: str
    timeout: float = 5.0
    max_bytes: int = DEFAULT_MAX_BYTES
    bearer_token_file: str = ""
    bearer_token_env: str = ""  # name of an env var holding the token
    headers_env: str = ""  # name of an env var holding extra headers (JSON object or "Name: value" lines)
    headers: Mapping[str, str] = field(default_factory=dict)  # static, non-secret headers
    ca_file: str = ""
    tls_insecure_skip_verify: bool = False
    retries: int = 1
    accept: str = DEFAULT_ACCEPT


@dataclass
class FetchResult:
    text: str
    content_type: str
    openmetrics: bool
    status: int
    bytes: int
    attempts: int = 1


@dataclass
class ScrapeResult:
    families: dict[str, MetricFamily]
    bytes: int
    openmetrics: bool
    duration: float  # seconds, fetch and parse
    attempts: int = 1


def redact_url(url: str) -> str:
    """The URL without user-info and query string, fit for logs and status messages."""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError for a port out of range or not a number
    except ValueError:
        return "<invalid url>"
    host = parts.hostname or ""
    if port:
        host = f"{host}:{port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def parse_headers_text(text: str) -> dict[str, str]:
    """Headers from an env var: a JSON object, or `Name: value` lines. Raises ValueError."""
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except RecursionError:
            raise ValueError("JSON nested too deep") from None
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise ValueError("expected a JSON object of string values")
        return {str(k): v for k, v in data.items()}
    headers = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise ValueError("expected 'Name: value' lines")
        headers[name.strip()] = value.strip()
    return headers


class Scraper:
    """Fetches and parses exposition bodies; one aiohttp session shared by all its targets."""

    def __init__(self, backoff_initial: float = 0.1, backoff_cap: float = 1.0) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._ssl: dict[str, ssl.SSLContext] = {}
        self._tokens: dict[str, tuple[float, str]] = {}  # path -> (mtime, token)
        # Per URL: sample-line heads and raw label text -> parsed labels (textparse.ParseCache);
        # shared label dicts are read-only for every consumer.
        self._parse_caches: dict[str, ParseCache] = {}
        self._backoff_initial = backoff_initial
        self._backoff_cap = backoff_cap

    # -- public ----------------------------------------------------------------------------

    async def scrape(self, target: ScrapeTarget, deadline: float | None = None) -> ScrapeResult:
        """Fetch and parse. `deadline` (event-loop time) bounds retries. Raises ScrapeError."""
        started = time.perf_counter()
        fetched = await self.fetch(target, deadline)
        cache = self._parse_caches.get(target.url)
        if cache is None:
            cache = self._parse_caches[target.url] = ParseCache()
        try:
            if fetched.bytes > PARSE_IN_THREAD_BYTES:
                families = await asyncio.to_thread(parse, fetched.text, fetched.openmetrics, cache)
            else:
                families = parse(fetched.text, fetched.openmetrics, cache)
        except ParseError as exc:
            raise ScrapeError(exc.reason, f"{redact_url(target.url)}: {exc}") from None
        return ScrapeResult(families, fetched.bytes, fetched.openmetrics,
                            time.perf_counter() - started, fetched.attempts)

    async def fetch(self, target: ScrapeTarget, deadline: float | None = None) -> FetchResult:
        """GET the URL with retries for transient failures. Raises ScrapeError."""
        loop = asyncio.get_running_loop()
        backoff = Backoff(self._backoff_initial, self._backoff_cap)
        attempt = 0
        while True:
            attempt += 1
            try:
                result = await self._fetch_once(target)
                result.attempts = attempt
                return result
            except ScrapeError as exc:
                if exc.reason not in TRANSIENT_REASONS or attempt > target.retries:
                    raise
                delay = backoff.delay()
                if deadline is not None and loop.time() + delay + target.timeout > deadline:
                    raise
                await asyncio.sleep(delay)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- internals -------------------------------------------------------------------------

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # Engines close idle keep-alive connections after ~5 s (uvicorn), about our interval:
            # keep ours shorter so we rarely send on a connection the server is closing.
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=3.0)
            self._session = aiohttp.ClientSession(connector=connector, trust_env=False,
                                                  auto_decompress=True)
        return self._session

    def _ssl_for(self, target: ScrapeTarget) -> ssl.SSLContext | bool | None:
        if not target.url.lower().startswith("https:"):
            return None
        if target.tls_insecure_skip_verify:
            return False
        context = self._ssl.get(target.ca_file)
        if context is None:
            try:
                context = ssl.create_default_context(cafile=target.ca_file or None)
            except (OSError, ssl.SSLError) as exc:
                raise ScrapeError("tls", f"cannot load CA file {target.ca_file}: {exc}") from None
            self._ssl[target.ca_file] = context
        return context

    def _token_from_file(self, path: str) -> str:
        try:
            mtime = os.stat(path).st_mtime
            cached = self._tokens.get(path)
            if cached is not None and cached[0] == mtime:
                return cached[1]
            with open(path, encoding="utf-8") as fh:
                token = fh.read().strip()
        except OSError as exc:
            raise ScrapeError("credentials", f"cannot read bearer token file {path}: "
                                             f"{exc.strerror or type(exc).__name__}") from None
        if not token:
            raise ScrapeError("credentials", f"bearer token file {path} is empty")
        self._tokens[path] = (mtime, token)
        return token

    def _headers_for(self, target: ScrapeTarget) -> dict[str, str]:
        headers = {"Accept": target.accept, **target.headers}
        if target.headers_env:
            raw = os.environ.get(target.headers_env)
            if raw is None:
                raise ScrapeError("credentials", f"env var {target.headers_env} is not set")
            try:
                headers.update(parse_headers_text(raw))
            except ValueError as exc:
                raise ScrapeError("credentials", f"env var {target.headers_env}: {exc}") from None
        token = ""
        if target.bearer_token_file:
            token = self._token_from_file(target.bearer_token_file)
        elif target.bearer_token_env:
            token = os.environ.get(target.bearer_token_env, "").strip()
            if not token:
                raise ScrapeError("credentials", f"env var {target.bearer_token_env} is not set or empty")
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    async def _fetch_once(self, target: ScrapeTarget) -> FetchResult:
        where = redact_url(target.url)
        headers = self._headers_for(target)
        ssl_arg = self._ssl_for(target)
        session = self._get_session()
        timeout = aiohttp.ClientTimeout(total=target.timeout)
        try:
            async with session.get(target.url, headers=headers, timeout=timeout, ssl=ssl_arg,
                                   allow_redirects=True, max_redirects=3) as resp:
                if not 200 <= resp.status < 300:
                    raise ScrapeError(f"http_{resp.status}",
                                      f"{where} answered {resp.status} {resp.reason or ''}".rstrip())
                content_type = resp.headers.get("Content-Type", "")
                mime = content_type.split(";", 1)[0].strip().lower()
                if mime in ("text/html", "application/json", "application/xhtml+xml"):
                    raise ScrapeError("not_prometheus", f"{where} returned {mime}, not metrics")
                declared = resp.content_length
                if declared is not None and declared > target.max_bytes:
                    raise ScrapeError("too_large",
                                      f"{where} announced {declared} bytes, limit {target.max_bytes}")
                body = await _read_bounded(resp, target.max_bytes, where)
                charset = resp.charset or "utf-8"
        except ScrapeError:
            raise
        except asyncio.TimeoutError:
            raise ScrapeError("timeout", f"{where} did not answer within {target.timeout:g}s") from None
        except aiohttp.ClientConnectorCertificateError as exc:
            raise ScrapeError("tls",
                              f"{where}: certificate verification failed: {exc.certificate_error}") from None
        except aiohttp.ClientConnectorSSLError as exc:
            raise ScrapeError("tls", f"{where}: TLS handshake failed: {exc.os_error}") from None
        except aiohttp.ClientConnectorDNSError:
            raise ScrapeError("dns", f"{where}: host name does not resolve") from None
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, ConnectionRefusedError) or exc.os_error.errno == errno.ECONNREFUSED:
                raise ScrapeError("connection_refused", f"{where}: connection refused") from None
            raise ScrapeError("connection_failed",
                              f"{where}: {exc.os_error.strerror or exc.os_error}") from None
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError,
                aiohttp.ClientConnectionResetError, ConnectionResetError) as exc:
            raise ScrapeError("reset",
                              f"{where}: connection closed mid-response ({type(exc).__name__})") from None
        except aiohttp.TooManyRedirects:
            raise ScrapeError("http_redirect", f"{where}: too many redirects") from None
        except (aiohttp.InvalidURL, ValueError) as exc:
            raise ScrapeError("bad_url", f"cannot use URL {where}: {type(exc).__name__}") from None
        except aiohttp.ClientOSError as exc:
            if exc.errno in (errno.ECONNRESET, errno.EPIPE):
                raise ScrapeError("reset", f"{where}: connection reset") from None
            raise ScrapeError("connection_failed", f"{where}: {exc.strerror or type(exc).__name__}") from None
        except aiohttp.ClientError as exc:
            raise ScrapeError("connection_failed", f"{where}: {type(exc).__name__}") from None
        try:
            text = body.decode(charset)
        except (UnicodeDecodeError, LookupError):
            raise ScrapeError("not_prometheus", f"{where}: body is not {charset} text") from None
        if text[:1] == "<" or text[:1] == "{":
            raise ScrapeError("not_prometheus", f"{where}: body looks like HTML/JSON, not metrics")
        openmetrics = mime == "application/openmetrics-text"
        return FetchResult(text, content_type, openmetrics, resp.status, len(body))


async def _read_bounded(resp: aiohttp.ClientResponse, limit: int, where: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await resp.content.read(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            resp.close()  # drop the connection: the rest of an endless body is never read
            raise ScrapeError("too_large", f"{where}: body exceeds {limit} bytes")
        chunks.append(chunk)


__all__ = ["DEFAULT_ACCEPT", "FetchResult", "MetricFamily", "ParseError", "Sample", "ScrapeError",
           "ScrapeResult", "ScrapeTarget", "Scraper", "parse", "parse_headers_text", "redact_url"]
