"""TLS and basic auth for the HTTP server, from an exporter-toolkit compatible web config file.

The file has the shape Prometheus' own exporters read with `--web.config.file`:

    tls_server_config:
      cert_file: server.crt
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert   # or NoClientCert (default), ...
      client_ca_file: ca.crt
      min_version: TLS12
    basic_auth_users:
      prometheus: $2b$12$...   # bcrypt hash, e.g. from `htpasswd -nBC 12 prometheus`

The file is re-read when it changes: new certificates and users apply to new connections and
requests; an invalid new file is logged and the previous settings stay in force. Whether TLS
is on at all is fixed at start-up (turning it on or off needs a restart, as in exporter-toolkit).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import os
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import bcrypt
import yaml
from aiohttp import web
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from .schema import MapOf, SchemaError, Settings, Str, setting, settings

log = logging.getLogger("infrapulse.web")

CLIENT_AUTH_TYPES = ("NoClientCert", "RequestClientCert", "RequireAnyClientCert",
                     "VerifyClientCertIfGiven", "RequireAndVerifyClientCert")
TLS_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
                "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}


@settings()
@dataclass(kw_only=True, slots=True)
class TlsServerSettings(Settings):
    """tls_server_config as SCHEMA validates it (defaults filled in); `load` resolves the file
    names against the web config file's directory."""

    cert_file: str = setting(Str("Server certificate (PEM).", required=True))
    key_file: str = setting(Str("Server private key (PEM).", required=True))
    client_auth_type: str = setting(Str("Client certificate policy, as in exporter-toolkit.",
                                        default="NoClientCert", choices=CLIENT_AUTH_TYPES))
    client_ca_file: str = setting(Str("CA bundle that client certificates must chain to.", default=""))
    min_version: str = setting(Str("Oldest TLS version accepted.", default="TLS12",
                                   choices=tuple(TLS_VERSIONS)))
    max_version: str = setting(Str("Newest TLS version accepted.", default="TLS13",
                                   choices=tuple(TLS_VERSIONS)))

    def files(self) -> list[str]:
        """The files it names (certificate, key, client CA where set)."""
        return [f for f in (self.cert_file, self.key_file, self.client_ca_file) if f]


@settings()
@dataclass(kw_only=True, slots=True)
class HttpServerSettings(Settings):
    """http_server_config: accepted for compatibility; nothing to set here."""


@settings()
@dataclass(kw_only=True, slots=True)
class WebConfigSettings(Settings):
    """The whole web config file."""

    tls_server_config: TlsServerSettings | None = setting(TlsServerSettings.SCHEMA)
    basic_auth_users: dict[str, str] = setting(MapOf("User name -> bcrypt hash of the password.",
                                                     value=Str()))
    http_server_config: HttpServerSettings = setting(HttpServerSettings.SCHEMA)


SCHEMA = WebConfigSettings.SCHEMA


# Request key: the basic auth user the middleware admitted (absent without basic_auth_users), for
# handlers that allow only some users (the probe source's perftest-server endpoint).
try:
    BASIC_AUTH_USER: Any = web.RequestKey("basic_auth_user", str)
except AttributeError:  # aiohttp before 3.12 has no typed request keys
    BASIC_AUTH_USER = "infrapulse.basic_auth_user"


class WebConfigError(Exception):
    pass


# bcrypt reads only the first 72 bytes of a password: bcrypt 4 ignores the rest (so a longer
# guess that shares them would pass) and bcrypt 5 raises ValueError. Longer ones never match.
BCRYPT_MAX_PASSWORD_BYTES = 72
BCRYPT_HASH = re.compile(r"\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}")
# A valid hash of no password anyone knows (cost 10), checked for unknown user names.
UNKNOWN_USER_HASH = b"$2b$10$LjWVw07ucrHX.X84XD53ROwahikOETZ.5amnFNb8GFgzWlY9h/GC."


def parse_basic_auth(header: str | None) -> tuple[str, bytes] | None:
    """(user, password) from an `Authorization: Basic ...` header, or None for anything else."""
    if not header or not header.startswith("Basic "):
        return None
    try:
        user, colon, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):  # binascii.Error is a ValueError
        return None
    return (user, password.encode()) if colon else None


def check_password(password: bytes, hashed: bytes) -> bool:
    """bcrypt's verdict, False for any password bcrypt cannot judge (too long, or refused by
    this bcrypt version), whatever the installed bcrypt does with it."""
    if len(password) > BCRYPT_MAX_PASSWORD_BYTES:
        return False
    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:  # bcrypt 5: NUL bytes or a malformed hash; never a 500
        return False


@dataclass
class WebConfig:
    path: Path
    tls: TlsServerSettings | None = None
    users: dict[str, bytes] = field(default_factory=dict)


def load(path: str | Path) -> WebConfig:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise WebConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise WebConfigError(f"{path}: not UTF-8 text: {exc.reason}") from None
    except yaml.YAMLError as exc:
        raise WebConfigError(f"{path}: invalid YAML: {exc}") from None
    except RecursionError:  # PyYAML composes recursively: "[[[[..." deeper than the stack
        raise WebConfigError(f"{path}: invalid YAML: nested too deeply") from None
    try:
        doc: WebConfigSettings = SCHEMA.validate(data, "")
    except SchemaError as exc:
        raise WebConfigError(f"{path}: {exc}") from None
    tls = doc.tls_server_config
    if tls is not None:
        def resolved(file: str) -> str:
            return str(path.parent / file) if file else file

        tls = replace(tls, cert_file=resolved(tls.cert_file), key_file=resolved(tls.key_file),
                      client_ca_file=resolved(tls.client_ca_file))
        needs_ca = tls.client_auth_type in ("VerifyClientCertIfGiven", "RequireAndVerifyClientCert")
        if needs_ca and not tls.client_ca_file:
            raise WebConfigError(f"{path}: tls_server_config.client_ca_file: "
                                 f"required for {tls.client_auth_type}")
    users: dict[str, bytes] = {}
    for user, hashed in doc.basic_auth_users.items():
        if not BCRYPT_HASH.fullmatch(hashed):
            raise WebConfigError(f"{path}: basic_auth_users.{user}: expected a bcrypt hash "
                                 "($2b$<cost 04-31>$<53 characters>, e.g. from htpasswd -nBC 12)")
        users[user] = hashed.encode()
    return WebConfig(path=path, tls=tls, users=users)


def _tls_file(path: Path, key: str, file: str) -> bytes:
    """The bytes of `file`, the value of tls_server_config's `key`; an error names both."""
    try:
        return Path(file).read_bytes()
    except OSError as exc:
        raise WebConfigError(f"{path}: tls_server_config.{key}: {file}: {exc.strerror or exc}") from None


def _check_certificates(path: Path, key: str, file: str) -> None:
    """Fail naming `key` and its file unless the file holds at least one PEM certificate."""
    text = _tls_file(path, key, file).decode("ascii", "replace")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=text)
    except (ssl.SSLError, ValueError):
        raise WebConfigError(f"{path}: tls_server_config.{key}: {file}: "
                             "no PEM certificate in it") from None


def _load_certificates(ctx: ssl.SSLContext, tls: TlsServerSettings, path: Path) -> None:
    """Load the server's certificate and key (and the client CA) into `ctx`; an error names the
    key and the file it is about, not just OpenSSL's reason."""
    _check_certificates(path, "cert_file", tls.cert_file)
    try:
        serialization.load_pem_private_key(_tls_file(path, "key_file", tls.key_file), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise WebConfigError(f"{path}: tls_server_config.key_file: {tls.key_file}: "
                             "not an unencrypted PEM private key") from None
    try:
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
    except ssl.SSLError as exc:
        why = "the key does not match the certificate" if exc.reason == "KEY_VALUES_MISMATCH" else str(exc)
        raise WebConfigError(f"{path}: tls_server_config: key_file {tls.key_file} with cert_file "
                             f"{tls.cert_file}: {why}") from None
    except OSError as exc:  # the file vanished since it was read above
        raise WebConfigError(f"{path}: tls_server_config.cert_file: {tls.cert_file}: "
                             f"{exc.strerror or exc}") from None
    if tls.client_ca_file:
        _check_certificates(path, "client_ca_file", tls.client_ca_file)
        ctx.load_verify_locations(tls.client_ca_file)


def _configure_context(ctx: ssl.SSLContext, tls: TlsServerSettings, path: Path) -> None:
    _load_certificates(ctx, tls, path)
    ctx.minimum_version = TLS_VERSIONS[tls.min_version]
    ctx.maximum_version = TLS_VERSIONS[tls.max_version]
    # Python cannot request a client certificate without verifying it, so "Request" and
    # "RequireAny" verify against the CA when one is given; without one they do not ask.
    mode = tls.client_auth_type
    if mode == "RequireAndVerifyClientCert" or (mode == "RequireAnyClientCert" and tls.client_ca_file):
        ctx.verify_mode = ssl.CERT_REQUIRED
    elif mode in ("VerifyClientCertIfGiven", "RequestClientCert") and tls.client_ca_file:
        ctx.verify_mode = ssl.CERT_OPTIONAL
    else:
        ctx.verify_mode = ssl.CERT_NONE


class WebSecurity:
    """Holds the live web config: the SSL context for the listener and the auth middleware."""

    def __init__(self, path: str | Path) -> None:
        self.config = load(path)
        self.ssl_context: ssl.SSLContext | None = None
        if self.config.tls:
            self.ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            _configure_context(self.ssl_context, self.config.tls, self.config.path)
        self._verified: set[bytes] = set()  # digests of credentials already checked against bcrypt
        self._mtime = self._stat()
        log.info("web config loaded", extra={"file": str(path), "tls": bool(self.config.tls),
                                             "basic_auth_users": len(self.config.users)})

    def _stat(self) -> tuple[tuple[int, int] | None, ...]:
        """(mtime, size) of the config and each TLS file; None for a file that cannot be read."""
        paths = [self.config.path]
        if self.config.tls:
            paths += [Path(f) for f in self.config.tls.files()]
        out: list[tuple[int, int] | None] = []
        for p in paths:
            try:
                st = os.stat(p)
                out.append((st.st_mtime_ns, st.st_size))
            except OSError:
                out.append(None)
        return tuple(out)

    def reload_if_changed(self) -> bool:
        stamp = self._stat()
        if stamp == self._mtime:
            return False
        self._mtime = stamp
        try:
            new = load(self.config.path)
            if bool(new.tls) != bool(self.config.tls):
                raise WebConfigError(f"{new.path}: turning TLS on or off needs a restart")
            if new.tls:
                assert self.ssl_context is not None  # built in __init__ whenever TLS is on
                _configure_context(self.ssl_context, new.tls, new.path)
        except WebConfigError as exc:
            log.error("web config reload failed; keeping the previous settings", extra={"error": str(exc)})
            return False
        self.config = new
        self._verified.clear()
        log.info("web config reloaded", extra={"file": str(new.path)})
        return True

    async def watch(self, every: float = 2.0) -> None:
        while True:
            await asyncio.sleep(every)
            self.reload_if_changed()

    async def _authorized(self, header: str | None) -> bool:
        users = self.config.users
        if not users:
            return True
        credential = parse_basic_auth(header)
        if credential is None:
            return False
        user, secret = credential
        hashed = users.get(user)
        if hashed is None:
            # Spend the same bcrypt time as for a known user, so timing does not tell which exist.
            await asyncio.to_thread(check_password, secret, UNKNOWN_USER_HASH)
            return False
        digest = hashlib.sha256(b"\0".join((user.encode(), secret, hashed))).digest()
        if digest in self._verified:
            return True
        # bcrypt is deliberately slow (~0.1-0.3 s): check once per credential, off the loop.
        ok = await asyncio.to_thread(check_password, secret, hashed)
        if ok:
            self._verified.add(digest)
        return ok

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                         ) -> web.StreamResponse:
        header = request.headers.get("Authorization")
        if not await self._authorized(header):
            response = web.Response(status=401, text="Unauthorized\n",
                                    headers={"WWW-Authenticate": 'Basic realm="infrapulse"'})
            # Clients send credentials on a new request anyway; a refused connection is not kept.
            response.force_close()
            return response
        credential = parse_basic_auth(header) if self.config.users else None
        if credential is not None:
            request[BASIC_AUTH_USER] = credential[0]
        return await handler(request)


def web_security(path: str | None) -> WebSecurity | None:
    """The WebSecurity for --web.config.file, or None. Raises ValueError with a clear message."""
    if not path:
        return None
    try:
        return WebSecurity(path)
    except WebConfigError as exc:
        raise ValueError(str(exc)) from None
