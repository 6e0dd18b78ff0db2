"""The package's import graph, read from the source with `ast` (nothing is imported).

Every `import` and `from ... import` of every module under exporter/infrapulse counts, at module
level or inside a function, relative ones resolved against their package. The rules:

* no import cycle at any level: function-level imports included (a deferred import hides a cycle,
  it does not remove it) and type-level ones too (`if TYPE_CHECKING:`: a cycle of types is a
  cycle of concepts);
* no arrow runs back up the layers (LAYERS: plumbing < sources < health < inspect < config <
  daemon, doctor, docs < cli < simulate);
* nothing outside simulate/ imports `infrapulse.simulate` at all: the CLI loads the simulators
  by name when `demo` or `simulate` runs (that a fresh interpreter importing the CLI loads none is
  checked in tests/integration/test_imports_interpreter.py);
* `infrapulse.sources` never imports `infrapulse.health`, and health and inspect read the
  sources only through the registry (`infrapulse.sources`, `sources.spec`, `sources.base`): the
  series they read are in the store and the catalogue;
* every package folder's `__init__.py` says in its docstring what the package owns and what it
  may import.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE_DIR = ROOT / "exporter" / "infrapulse"
PACKAGE = "infrapulse"

# Layers, lowest first: a module may import its own layer and those below. Top-level modules not
# named are plumbing (store, catalog, schema, rates, http, services, ...), layer 0.
LAYERS = {"sources": 1, "health": 2, "inspect": 3, "config": 4, "daemon": 5, "doctor": 5, "docs": 5,
          "cli": 6, "__main__": 6, "simulate": 7}
# What health and inspect may import of the sources: the registry and the Source base types.
SOURCE_REGISTRY = {"infrapulse.sources", "infrapulse.sources.spec", "infrapulse.sources.base"}


@dataclass(frozen=True)
class Edge:
    importer: str
    target: str
    scope: str  # the enclosing top-level function or class, "<module>" at module level
    line: int
    type_checking: bool  # under `if TYPE_CHECKING:`: never executed

    def where(self) -> str:
        return f"{self.importer}:{self.line} ({self.scope})"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


MODULES = package_modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name `from <node.module>` names, relative levels resolved against `module`."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool) -> None:
        self.module, self.is_package = module, is_package
        self.edges: list[Edge] = []
        self._scope: list[str] = []
        self._type_checking = 0

    def _add(self, target: str, node: ast.stmt) -> None:
        if target == PACKAGE or target.startswith(PACKAGE + "."):
            # The most specific module the name denotes (`a.b.name` where name is not a module -> a.b).
            while target not in MODULES and "." in target:
                target = target.rsplit(".", 1)[0]
            self.edges.append(Edge(self.module, target, self._scope[0] if self._scope else "<module>",
                                   node.lineno, self._type_checking > 0))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        source = _resolve(self.module, self.is_package, node)
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            self._add(submodule if submodule in MODULES else source, node)

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self._scope.append(node.name)
        self.generic_visit(node)
        self._scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self._type_checking += 1
            for child in node.body:
                self.visit(child)
            self._type_checking -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)


def import_edges(module: str, source: str, is_package: bool) -> list[Edge]:
    collector = _Collector(module, is_package)
    collector.visit(ast.parse(source, filename=module))
    return collector.edges


def all_edges() -> list[Edge]:
    edges = []
    for module, path in MODULES.items():
        edges += import_edges(module, path.read_text(), path.name == "__init__.py")
    return edges


@pytest.fixture(scope="module")
def edges() -> list[Edge]:
    """The package's import edges: parsed when a test here runs, not at collection (every
    xdist worker collects every file)."""
    return all_edges()


def find_cycles(edges: list[Edge]) -> list[list[str]]:
    """One concrete cycle per strongly connected component (Tarjan), each as a closed path."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if e.importer != e.target:
            graph.setdefault(e.importer, set()).add(e.target)
        else:
            graph.setdefault(e.importer, set()).add(e.importer)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def strongconnect(v: str) -> None:  # recursion depth is bounded by the number of modules
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return [_cycle_in(component, graph) for component in components]


def _cycle_in(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest closed path through the component's first module (breadth-first)."""
    start, members = component[0], set(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph.get(v, set()) & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start] if v != start else [start, start]
                if w not in parents:
                    parents[w] = v
                    following.append(w)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a component always has one


def _describe(cycle: list[str], edges: list[Edge]) -> str:
    hops = []
    for a, b in zip(cycle, cycle[1:]):
        where = next(e.where() for e in edges if e.importer == a and e.target == b)
        hops.append(f"{a} -> {b} [{where}]")
    return "\n  ".join(hops)


def _in(package: str, name: str) -> bool:
    return name == package or name.startswith(package + ".")


def layer_of(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1], 0) if len(parts) > 1 else 0


def simulate_violations(edges: list[Edge]) -> list[str]:
    return [f"{e.where()} imports {e.target}" for e in edges
            if _in("infrapulse.simulate", e.target) and not _in("infrapulse.simulate", e.importer)]


def back_arrows(edges: list[Edge]) -> list[str]:
    return [f"{e.where()} imports {e.target} (layer {layer_of(e.importer)} -> {layer_of(e.target)})"
            for e in edges if layer_of(e.target) > layer_of(e.importer)]


def source_internals_read_above(edges: list[Edge]) -> list[str]:
    return [f"{e.where()} imports {e.target}" for e in edges
            if (_in("infrapulse.health", e.importer) or _in("infrapulse.inspect", e.importer))
            and _in("infrapulse.sources", e.target) and e.target not in SOURCE_REGISTRY]


def health_from_sources_violations(edges: list[Edge]) -> list[str]:
    return [f"{e.where()} imports {e.target}" for e in edges
            if e.importer.startswith("infrapulse.sources") and
            (e.target == "infrapulse.health" or e.target.startswith("infrapulse.health."))]


# -- the rules on the real package --------------------------------------------------------------

def test_the_graph_covers_the_package(edges: list[Edge]) -> None:
    """The walk sees every subsystem and its function-level imports (the checks below cannot be vacuous)."""
    assert {"infrapulse.cli", "infrapulse.daemon", "infrapulse.sources", "infrapulse.health",
            "infrapulse.simulate", "infrapulse.sources.gnmi.source"} <= set(MODULES)
    assert len(MODULES) >= 60
    cli = {(e.scope, e.target) for e in edges if e.importer == "infrapulse.cli"}
    assert ("cmd_run", "infrapulse.daemon") in cli  # a function-level relative import, resolved
    assert ("<module>", "infrapulse.config") in cli
    assert ("source_options", "infrapulse.sources.gpu.nvml") in cli


def test_no_import_cycles_at_any_level(edges: list[Edge]) -> None:
    cycles = find_cycles(edges)  # type-level imports included
    assert not cycles, "import cycles:\n" + "\n".join(f"  {_describe(c, edges)}" for c in cycles)


def test_no_arrow_runs_back_up_the_layers(edges: list[Edge]) -> None:
    assert back_arrows(edges) == []
    # every layer is really there (the rule cannot pass by misnaming one)
    assert {layer_of(m) for m in MODULES} == set(LAYERS.values()) | {0}


def test_production_never_imports_the_simulators(edges: list[Edge]) -> None:
    assert simulate_violations(edges) == []


def test_health_and_inspect_read_sources_only_through_the_registry(edges: list[Edge]) -> None:
    assert source_internals_read_above(edges) == []


def test_sources_never_import_health(edges: list[Edge]) -> None:
    assert health_from_sources_violations(edges) == []


PACKAGE_FOLDERS = sorted({p.parent for p in PACKAGE_DIR.rglob("*.py")})


@pytest.mark.parametrize("folder", PACKAGE_FOLDERS, ids=lambda p: str(p.relative_to(PACKAGE_DIR.parent)))
def test_every_package_says_what_it_owns_and_may_import(folder: Path) -> None:
    init = folder / "__init__.py"
    assert init.is_file(), f"{folder} holds modules but no __init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    assert len(doc.split()) >= 8, f"{init}: the docstring should say what the package owns"
    if folder != PACKAGE_DIR:  # the root package is the top of the graph: everything is below it
        assert "imports" in doc.lower(), f"{init}: the docstring should say what the package may import"


# -- the checks themselves can fail -------------------------------------------------------------

def _edges_of(sources: dict[str, str]) -> list[Edge]:
    edges = []
    for module, text in sources.items():
        edges += import_edges(module, text, is_package=False)
    return edges


def test_relative_and_function_level_imports_resolve() -> None:
    edges = _edges_of({"infrapulse.sources.gnmi.source": (
        "from ..base import Source\n"
        "from . import profile\n"
        "from ...store import Store\n"
        "import infrapulse.health.latency as latency\n"
        "def f():\n    from ...health import latency\n"
        "if TYPE_CHECKING:\n    from ...daemon import Daemon\n")})
    assert [(e.target, e.scope, e.type_checking) for e in edges] == [
        ("infrapulse.sources.base", "<module>", False),
        ("infrapulse.sources.gnmi.profile", "<module>", False),
        ("infrapulse.store", "<module>", False),
        ("infrapulse.health.latency", "<module>", False),
        ("infrapulse.health.latency", "f", False),
        ("infrapulse.daemon", "<module>", True),
    ]
    assert len(health_from_sources_violations(edges)) == 2


def test_a_cycle_through_a_function_level_import_is_reported() -> None:
    edges = _edges_of({
        "infrapulse.store": "from .rates import counter_rate\n",
        "infrapulse.rates": "def f():\n    from .catalog import family\n",
        "infrapulse.catalog": "from . import store\n",
        "infrapulse.metrics": "from .store import Store\n",
    })
    cycles = find_cycles(edges)
    assert cycles == [["infrapulse.catalog", "infrapulse.store", "infrapulse.rates", "infrapulse.catalog"]]
    assert "infrapulse.rates -> infrapulse.catalog [infrapulse.rates:2 (f)]" in _describe(cycles[0], edges)


def test_a_type_checking_import_is_no_cycle_but_still_layering() -> None:
    edges = _edges_of({
        "infrapulse.store": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .daemon import "
                            "Daemon\n",
        "infrapulse.daemon": "from .store import Store\nfrom .simulate.demo import run_demo\n",
    })
    assert find_cycles([e for e in edges if not e.type_checking]) == []
    assert find_cycles(edges) == [["infrapulse.daemon", "infrapulse.store", "infrapulse.daemon"]]
    assert simulate_violations(edges) == ["infrapulse.daemon:2 (<module>) imports infrapulse.simulate.demo"]
    assert back_arrows(edges) == [
        "infrapulse.store:3 (<module>) imports infrapulse.daemon (layer 0 -> 5)",
        "infrapulse.daemon:2 (<module>) imports infrapulse.simulate.demo (layer 5 -> 7)"]


def test_a_health_module_reading_a_source_module_is_reported() -> None:
    edges = _edges_of({
        "infrapulse.health.latency": "from ..sources.serving.source import ServingSource\n"
                                     "from ..sources import SPECS\n",
        "infrapulse.inspect.sample": "from ..sources.base import Source\n"})
    assert source_internals_read_above(edges) == [
        "infrapulse.health.latency:1 (<module>) imports infrapulse.sources.serving.source"]
