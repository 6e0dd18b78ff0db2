"""One gRPC channel to one switch: credentials, TLS material, channel options.

Credentials are read from an environment variable or a file at each connect (a rotated secret
is picked up on the next reconnect), sent as the gNMI `username` / `password` gRPC metadata, and
never logged or exported. TLS is the default; `insecure: true` opts out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import grpc

from .config import SwitchSettings


class ChannelSetupError(Exception):
    """Credentials or TLS files that cannot be read: the session fails before dialling.
    `reason` is the short code shown as the source status reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class Credentials:
    username: str = ""
    password: str = ""

    def metadata(self) -> tuple[tuple[str, str], ...]:
        if not (self.username or self.password):
            return ()
        return (("username", self.username), ("password", self.password))


def _read_secret(env: str | None, file: str | None, what: str) -> str:
    if env:
        value = os.environ.get(env)
        if value is None:
            raise ChannelSetupError("credentials", f"{what}: environment variable {env} is not set")
        return value.strip()
    if file:
        try:
            return Path(file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ChannelSetupError("credentials",
                                    f"{what}: cannot read {file}: {exc.strerror or exc}") from None
    return ""


def read_credentials(conn: SwitchSettings) -> Credentials:
    username = conn.username or _read_secret(conn.username_env, conn.username_file, "username")
    password = _read_secret(conn.password_env, conn.password_file, "password")
    return Credentials(username, password)


def _read_pem(path: str | None, what: str) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ChannelSetupError("tls", f"cannot read {what} {path}: {exc.strerror or exc}") from None


def open_channel(conn: SwitchSettings) -> grpc.aio.Channel:
    keepalive_ms = int(conn.keepalive * 1000)
    options: list[tuple[str, int | str]] = [
        ("grpc.keepalive_time_ms", keepalive_ms),
        ("grpc.keepalive_timeout_ms", max(1000, keepalive_ms // 3)),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.max_receive_message_length", 64 * 1024 * 1024),
        # Fixed 64 KiB flow-control windows instead of BDP-probed ones: with hundreds of streams
        # the probed windows (megabytes each) dominate memory, and telemetry needs no more.
        ("grpc.http2.bdp_probe", 0),
        # reconnects are ours (with backoff); a fresh channel per session keeps state simple
        ("grpc.enable_retries", 0),
    ]
    if conn.insecure:
        return grpc.aio.insecure_channel(conn.address, options=options)
    tls = conn.tls
    creds = grpc.ssl_channel_credentials(
        root_certificates=_read_pem(tls.ca_file, "tls.ca_file"),
        private_key=_read_pem(tls.key_file, "tls.key_file"),
        certificate_chain=_read_pem(tls.cert_file, "tls.cert_file"))
    if tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    return grpc.aio.secure_channel(conn.address, creds, options=options)


__all__ = ["ChannelSetupError", "Credentials", "open_channel", "read_credentials"]
