"""Optional modules that extend the daemon or the CLI when they are present."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from types import ModuleType


def optional_modules(names: Iterable[str]) -> Iterator[ModuleType]:
    """Import each named module that exists; a missing one is skipped, a broken one raises."""
    for name in names:
        try:
            yield importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
