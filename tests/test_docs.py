"""Reference docs match the code; the README keeps its two commands. Whether the generated docs are
current (`infrapulse docs` and scripts/generate_docs.py, run as processes) is checked in
tests/integration/test_docs_cli.py."""

from __future__ import annotations

import re

from conftest import ROOT


def test_metrics_doc_lists_every_family_and_the_lldp_join():
    from infrapulse import catalog
    from infrapulse.docs import load_everything

    load_everything()
    text = (ROOT / "docs/metrics.md").read_text()
    names = [f.name for f in catalog.all_families() if f.source != "test"]
    assert len(names) > 100
    missing = [n for n in names if f"`{n}`" not in text]
    assert missing == []
    assert "infrapulse_switch_lldp_neighbor_info" in text and "group_left (hostname)" in text


def test_readme_keeps_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    ci = (ROOT / ".ci/run").read_text()
    assert "make test" in ci


def test_readme_links_resolve():
    import re

    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        if "://" not in target:
            assert (ROOT / target).exists(), target


def _layout_block() -> str:
    text = (ROOT / "docs" / "development.md").read_text()
    section = text[text.index("## Layout"):]
    return section[section.index("```") + 3:section.index("```", section.index("```") + 3)]


def test_the_development_layout_names_every_module_and_nothing_else():
    """docs/development.md's layout is checked against the tree, both ways."""
    import re

    package = ROOT / "exporter" / "infrapulse"
    block = _layout_block()
    words = set(re.findall(r"[a-z_][a-z0-9_]*", block))
    top_modules = {p.stem for p in package.glob("*.py") if not p.stem.startswith("__")}
    packages = {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
    sub_modules = {p.stem for name in ("health", "inspect", "doctor", "exposition") for p in
                   (package / name).glob("*.py") if not p.stem.startswith("__")}
    missing = sorted((top_modules | packages | sub_modules) - words)
    assert missing == [], f"docs/development.md's layout does not name {missing}"
    # and the names in the package lines are real modules or packages
    lines = [line for line in block.splitlines() if line.startswith("  ")]
    named = set(re.findall(r"\b[a-z_][a-z0-9_]*\b", " ".join(
        line.split(":", 1)[-1] if line.lstrip().startswith(("plumbing:",)) else line for line in lines)))
    real = top_modules | packages | sub_modules | {
        p.stem for p in package.rglob("*.py")} | {p.name for p in package.rglob("*") if p.is_dir()}
    prose = {"the", "and", "one", "per", "file", "component", "with", "its", "each", "spec", "py",
             "registry", "data", "source", "demo", "simulator", "scenarios", "not", "imported", "by",
             "exporter", "infrapulse", "doctor", "metrics", "real", "collection", "plumbing",
             "signals", "static"}
    unknown = sorted(named - real - prose)
    assert unknown == [], f"docs/development.md's layout names what the tree does not have: {unknown}"


def test_the_docs_index_lists_every_page():
    index = (ROOT / "docs" / "README.md").read_text()
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name != "README.md")
    assert [p for p in pages if f"]({p})" not in index] == []
    for target in re.findall(r"\]\(([^)#]+)\)", index):
        assert (ROOT / "docs" / target).exists(), target
