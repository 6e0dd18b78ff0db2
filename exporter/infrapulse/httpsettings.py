"""The HTTP server's settings (the config file's `http:` section): connection caps and deadlines
for the guard, the render cache and the status page's CSP report URI."""

from __future__ import annotations

from dataclasses import dataclass

from .schema import Duration, Int, Settings, Str, setting, settings


@settings("HTTP server limits.")
@dataclass(kw_only=True, slots=True)
class HttpSettings(Settings):
    max_connections: int = setting(Int(
        "Open connections accepted at once. When all are taken, the oldest connection that has not "
        "sent a request yet is closed to admit a new one; a new one is refused only when every "
        "connection is busy.", default=256, min=1))
    max_connections_per_client: int = setting(Int(
        "Open connections accepted from one client address (an IPv6 client: its /64) at once; more "
        "are closed on arrival.", default=64, min=1))
    handshake_timeout: float = setting(Duration(
        "A TLS connection that has not finished its handshake this long after connecting is closed.",
        default="5s", min=0.1))
    header_timeout: float = setting(Duration(
        "A connection must send a complete request line and headers within this long of connecting "
        "(after the TLS handshake), and of the first byte of every later request, or it is closed.",
        default="5s", min=0.1))
    idle_timeout: float = setting(Duration(
        "A keep-alive connection that sends no new request for this long after a response is closed.",
        default="15s", min=0.1))
    csp_report_uri: str = setting(Str(
        "Where browsers report Content-Security-Policy violations of the status page (the policy's "
        "report-uri); empty sends no reports.", default="", pattern=r"(https?://[^\s;,'\"]+|/[^\s;,'\"]*)?"))
    render_cache: float = setting(Duration(
        "Scrapes within this long of a /metrics render share its bytes unless a source published new "
        "data since (0s renders every scrape). Keeps bursts of scrapers cheap on large fabric "
        "instances, whose streamed gNMI values can then be up to this old.", default="1s", min=0))
