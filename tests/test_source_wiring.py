"""Every source in the registry (`infrapulse.sources.SPECS`) is wired through the repository, so
adding one cannot silently skip a step: it appears in the example config of its role and in the
README's source table, and some family it exports is read by a dashboard panel, by an alert or
recording rule, and by a health signal — and what its spec names is real: each signal module
has a signal reading its families, its doctor probe resolves, its simulator has a `demo_part`,
each dashboard and rule file it names reads its families. (Its config section and its rows in
docs/metrics.md and docs/configuration.md are derived from the registry;
tests/integration/test_demo_sources.py checks the demo simulates it.) docs/development.md lists the steps."""

from __future__ import annotations

import re

import pytest
import yaml

from conftest import ROOT
from dashboard_model import load_dashboards, queries
from infrapulse import catalog
from infrapulse.docs import load_everything
from infrapulse.sources import SPECS, registry, specs

load_everything()
SOURCES = registry()
SPEC = specs()
# Sources doctor cannot check in one shot yet (a probe run or the mesh need peers and minutes).
WITHOUT_DOCTOR_PROBE = {"probe", "mesh"}
# Sources the score does not score: what they export names who a fault hurts (health/blast.py);
NOT_SCORED = {"workload"}
# Of those, the ones nothing in health/ reads at all (workload feeds the blast radius).
NOT_READ_BY_HEALTH: set[str] = set()
FAMILY = re.compile(r"\binfrapulse_[a-z0-9_]+")


def families_by_source() -> dict[str, set[str]]:
    """Source name -> the series names of its families (a shared family, "nvml, dcgm", counts for both)."""
    out: dict[str, set[str]] = {}
    for family in catalog.all_families():
        names = {family.name}
        if family.type == catalog.HISTOGRAM:
            names |= {family.name + s for s in ("_bucket", "_sum", "_count")}
        for source in (s.strip() for s in family.source.split(",")):
            out.setdefault(source, set()).update(names)
    return out


def dashboard_reads() -> set[str]:
    return {name for board in load_dashboards().values() for q in queries(board)
            for name in FAMILY.findall(q.expr)}


def rule_reads() -> set[str]:
    return {name for path in sorted((ROOT / "alerts").glob("*.rules.yaml"))
            for group in yaml.safe_load(path.read_text())["groups"] for rule in group["rules"]
            for name in FAMILY.findall(rule["expr"])}


def health_reads() -> set[str]:
    from infrapulse.health import blast
    from infrapulse.health.signals import SIGNALS

    scored = {name for signal in SIGNALS.values() for name in (*signal.families, *signal.counters)}
    return scored | {blast.GPU_INFO, blast.NIC_INFO}  # the blast radius reads the attribution joins


READERS = {"a dashboard panel": dashboard_reads, "an alert or recording rule": rule_reads,
           "a health signal": health_reads}


def test_there_are_sources_of_both_roles() -> None:
    assert {"infiniband", "ethtool", "nvml", "dcgm", "gnmi", "serving"} <= set(SOURCES)
    assert {cls.role for cls in SOURCES.values()} == {"node", "fabric"}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_source_is_in_the_example_config_of_its_role(name: str) -> None:
    role = SOURCES[name].role
    config = yaml.safe_load((ROOT / "deploy" / "config" / f"{role}.yaml").read_text())
    assert name in config["sources"], f"deploy/config/{role}.yaml has no sources.{name} block"


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_source_is_in_the_readme_table(name: str) -> None:
    rows = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| `")]
    assert any(f"`{name}`" in row.split(" | ")[0] for row in rows), \
        f"README.md's source table has no `{name}`"


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("name", sorted(SOURCES))
def test_some_family_of_the_source_is_read(name: str, reader: str) -> None:
    exported = families_by_source().get(name, set())
    assert exported, f"source {name} declares no family (catalog.Family(source=...))"
    if reader == "a health signal" and name in NOT_READ_BY_HEALTH:
        assert not exported & READERS[reader](), f"{name} is read by health: drop it from NOT_READ_BY_HEALTH"
        return
    assert exported & READERS[reader](), f"no family of source {name} is read by {reader}"


def test_one_registry_one_spec_per_source() -> None:
    assert len({s.name for s in SPECS}) == len(SPECS) == len(SOURCES)
    assert all(SPEC[name].source is cls for name, cls in SOURCES.items())


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_each_signal_module_the_spec_names_scores_the_source(name: str) -> None:
    import importlib

    spec = SPEC[name]
    if name in NOT_SCORED:
        assert not spec.signals
        return
    assert spec.signals, f"{name}: its spec names no health signal module"
    exported = families_by_source()[name]
    for module_name in spec.signals:
        module = importlib.import_module(f"infrapulse.health.signals.{module_name}")
        reads = {f for s in module.SIGNALS if name in " ".join(s.sources).replace("|", " ").split()
                 for f in (*s.families, *s.counters)}
        assert reads & exported, f"{name}: no signal of health.signals.{module_name} reads its families"


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_the_doctor_probe_and_the_simulator_resolve(name: str) -> None:
    import importlib

    from infrapulse.doctor.probes import probe_of

    spec = SPEC[name]
    probe = probe_of(spec)
    if name in WITHOUT_DOCTOR_PROBE:  # doctor says "no probe for this source yet" on its row
        assert probe is None
    else:
        assert probe is not None and callable(probe), f"{name}: no doctor probe"
    assert spec.simulator, f"{name}: no demo simulator"
    module = importlib.import_module(f"infrapulse.simulate.{spec.simulator}")
    assert callable(getattr(module, "demo_part", None)), f"simulate/{spec.simulator}.py has no demo_part"


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_the_dashboards_and_rule_files_the_spec_names_read_its_families(name: str) -> None:
    spec = SPEC[name]
    exported = families_by_source()[name]
    boards = load_dashboards()
    assert spec.dashboards and spec.alerts, f"{name}: its spec names no dashboard or rule file"
    for board in spec.dashboards:
        uid = board.removesuffix(".json")
        assert uid in boards, f"{name}: dashboards/{board} does not exist"
        assert {n for q in queries(boards[uid]) for n in FAMILY.findall(q.expr)} & exported, \
            f"dashboards/{board} reads no family of {name}"
    for rules in spec.alerts:
        doc = yaml.safe_load((ROOT / "alerts" / rules).read_text())
        names = {n for g in doc["groups"] for r in g["rules"] for n in FAMILY.findall(r["expr"])}
        assert names & exported, f"alerts/{rules} reads no family of {name}"


def test_the_readers_can_fail() -> None:
    """A source whose families nobody reads is reported: the sets are real, not everything."""
    assert "infrapulse_test_nothing_reads_this_total" not in dashboard_reads() | rule_reads() | health_reads()
    assert len(dashboard_reads()) > 30 and len(rule_reads()) > 30 and len(health_reads()) > 20
