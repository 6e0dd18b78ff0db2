"""Which switches this fabric instance owns: a stable hash of the switch name, mod the count.

`shard_of(name, count)` is the same function as Prometheus' `hashmod` relabel action: the MD5
of the name, its last 8 bytes read as a big-endian unsigned 64-bit integer, modulo `count`.
So a switch's shard depends on nothing but its own name and the count: adding or removing a
switch never moves another one, every instance computes the same split without talking to the
others, and a Prometheus `hashmod` relabel rule can reproduce it.

The instance's own index and the count come, in this order, from the config (`shard: {index,
count}`), from INFRAPULSE_SHARD_INDEX / INFRAPULSE_SHARD_COUNT, or (index only) from the
ordinal suffix of a Kubernetes StatefulSet pod's hostname (`infrapulse-fabric-2` -> 2).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import ShardSettings

_ORDINAL = re.compile(r"-(\d+)$")


class ShardError(ValueError):
    pass


def stable_hash(name: str) -> int:
    digest = hashlib.md5(name.encode("utf-8"), usedforsecurity=False).digest()
    return int.from_bytes(digest[8:], "big")


def shard_of(name: str, count: int) -> int:
    return stable_hash(name) % count


@dataclass(frozen=True)
class Shard:
    index: int = 0
    count: int = 1

    def owns(self, name: str) -> bool:
        return self.count <= 1 or shard_of(name, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def resolve(config: ShardSettings | None, env: Mapping[str, str], hostname: str) -> Shard:
    """This instance's shard from config, else environment, else the StatefulSet ordinal."""
    index, count = (config.index, config.count) if config is not None else (None, None)
    where = "shard"
    if count is None and env.get("INFRAPULSE_SHARD_COUNT"):
        count, where = _int(env["INFRAPULSE_SHARD_COUNT"], "INFRAPULSE_SHARD_COUNT"), "environment"
    if index is None and env.get("INFRAPULSE_SHARD_INDEX"):
        index = _int(env["INFRAPULSE_SHARD_INDEX"], "INFRAPULSE_SHARD_INDEX")
    if count is None:
        count = 1
    if index is None:
        match = _ORDINAL.search(hostname) if count > 1 else None
        if count > 1 and not match:
            raise ShardError(f"shard count is {count} but no index is set (shard.index, "
                             f"INFRAPULSE_SHARD_INDEX, or a StatefulSet hostname like name-0; "
                             f"got {hostname!r})")
        index = int(match.group(1)) if match else 0
    if count < 1:
        raise ShardError(f"{where}: count must be >= 1, got {count}")
    if not 0 <= index < count:
        raise ShardError(f"{where}: index must be in 0..{count - 1}, got {index}")
    return Shard(index, count)


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ShardError(f"{name} must be an integer, got {text!r}") from None
