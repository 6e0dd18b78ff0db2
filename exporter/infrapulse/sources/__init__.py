"""Telemetry sources. Each module here that defines `SOURCE` (a `Source` subclass) is one.

Discovery is by module, so adding a source means adding a module: the config schema, the
daemon and the docs pick it up.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from .base import Source


@cache
def registry() -> dict[str, type[Source]]:
    found: dict[str, type[Source]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        source = getattr(module, "SOURCE", None)
        if isinstance(source, type) and issubclass(source, Source):
            found[source.name] = source
    return found
