"""Layering of the health package: sources never import health (health reads what they publish)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "exporter" / "infrapulse"


def _imported_modules(path: Path) -> set[str]:
    """Absolute module names a file imports (relative imports resolved against its package)."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            out |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    return out


def test_import_resolution_of_relative_imports():
    source = PACKAGE / "sources" / "serving" / "source.py"
    assert "infrapulse.health.latency" not in _imported_modules(source)
    assert "infrapulse.sources.base" in _imported_modules(source)  # `from ..base import ...`
    assert "infrapulse.catalog" in _imported_modules(source)  # `from ... import catalog`


def test_nothing_under_sources_imports_health():
    offenders = {str(p.relative_to(PACKAGE)): sorted(m for m in _imported_modules(p)
                                                     if m.startswith("infrapulse.health"))
                 for p in sorted((PACKAGE / "sources").rglob("*.py"))}
    assert {p: m for p, m in offenders.items() if m} == {}
    assert len(offenders) > 20  # the walk really covered the source packages
