"""Render docs/metrics.md (from the catalogue), docs/configuration.md (from the schema) and the
generated sections of docs/health.md (from the health signals).

The renderers live here, in the package; writing into a source checkout is the job of
scripts/generate_docs.py. `infrapulse docs --write` and `infrapulse docs [--check]` find the
checkout (the current directory or a parent, or --root) and run that script, which renders
with the checkout's own code. A test fails when the committed files differ from the code.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from . import catalog
from .schema import Duration, Field, ListOf, Section, format_duration, walk

# Where the writer lives inside a source checkout (relative to its root).
SCRIPT = Path("scripts") / "generate_docs.py"

METRICS_HEADER = """# Metrics reference

Generated from the code by `make docs` (`infrapulse docs --write`); a test fails when this
file and the code disagree. Every family is prefixed `infrapulse_`, uses base units (bytes,
seconds, ratios 0-1, celsius, joules, watts), and carries no target labels (`instance`, `job`,
`cluster` come from Prometheus). Counters end in `_total` and are exposed raw: use `rate()` or
`increase()`. Series of something that disappeared (a port, a GPU, a switch) leave /metrics
after their source's staleness window (three missed polls, at least 30 s). Beside these, the
daemon exports the standard `process_*` families of prometheus_client's ProcessCollector
(`process_resident_memory_bytes`, `process_cpu_seconds_total`, `process_open_fds`, ...).

## Joining a node's series to the switch ports that serve it

Each node instance exports `infrapulse_node_info{hostname, role}`; each fabric instance exports
`infrapulse_switch_lldp_neighbor_info{switch, interface, neighbor_system, neighbor_port}`, one
series per switch port whose LLDP neighbour is a host. Matching `neighbor_system` to
`hostname` ties a node to the switch ports (and so the queues and PFC counters) in front of
its NICs, even when node and fabric run as separate instances:

```promql
# ECN-marked ratio of every switch queue that serves a node, labelled with the node's hostname
  (
      sum by (switch, interface) (rate(infrapulse_switch_queue_ecn_marked_packets_total[5m]))
    / sum by (switch, interface) (rate(infrapulse_switch_queue_transmitted_packets_total[5m]))
  )
* on (switch, interface) group_left (hostname)
  label_replace(max by (switch, interface, neighbor_system) (infrapulse_switch_lldp_neighbor_info),
                "hostname", "$1", "neighbor_system", "(.*)")
```

Join the result to node series `on (hostname)` through `infrapulse_node_info` (e.g. to put a
node's serving TTFT p95 beside the congestion in front of it, as the Correlation dashboard does).

## Joining a series to the workloads it hurts

The `workload` source exports join series, never a workload label on every series
(docs/attribution.md): `infrapulse_workload_gpu_info{gpu, uuid, kind, workload, ...}` per GPU
and workload, `infrapulse_workload_nic_info{device, interface, kind, workload, ...}` per RDMA NIC
and workload (the workloads of the GPUs nearest that NIC, and pods holding it), and
`infrapulse_topology_gpu_nic_info{gpu, device, interface, numa_node, link, nearest}`. One NIC or
GPU series has many workloads, so the join is `group_right`:

```promql
# RDMA retransmissions per second by the workloads using each NIC
  sum by (job, instance, device) (rate(infrapulse_rdma_retransmission_events_total[5m]))
* on (job, instance, device) group_right ()
  infrapulse_workload_nic_info

# GPU utilisation of one Slurm job's GPUs
  infrapulse_gpu_utilization_ratio
* on (job, instance, gpu) group_left (slurm_job_id)
  infrapulse_workload_gpu_info{kind="slurm_job", workload="4242"}
```

From a switch port to the workloads, the chain is LLDP (`neighbor_system`, `neighbor_port`) to the
node and its netdev, then that netdev's `infrapulse_workload_nic_info{interface}` on the node's
instance; the health API follows it for you (`affected` on each detractor, docs/attribution.md).
The recording rules `instance_kind_workload:infrapulse_rdma_retransmission_events:rate5m` and
`instance_kind_workload:infrapulse_nic_pfc_pause_duration_seconds:rate5m` keep the first kind.

"""

CONFIG_HEADER = """# Configuration reference

Generated from the config schema by `make docs` (`infrapulse docs --write`); a test fails when
this file and the code disagree.

infrapulse reads one YAML file: `infrapulse run --config FILE`. Validate it with
`infrapulse check-config FILE`: an unknown key, a key written twice, a wrong type, a bad
duration, thresholds whose good is worse than their bad or an unreadable file stops with exit
code 2 and one line per problem — all of them at once — naming the file, the key path and the
reason, e.g.

```
config error: node.yaml: interval: duplicate key (line 9; first at line 2): YAML keeps only the last one
config error: node.yaml: sources.infiniband.devices[1]: invalid regular expression '[': ...
```

A key that is still accepted but does nothing (deprecated) loads with a `warning:` line.
`infrapulse doctor FILE` does all of this and then checks the host against the config (files,
NVML, RDMA devices, switches, engines; see docs/quickstart-node.md).

Durations are written like Prometheus durations: `250ms`, `5s`, `1m30s`, `2h`. Every key is
optional unless marked required; a source block that is absent keeps its defaults. `kill -HUP`
re-reads the file: a valid new config restarts only the sources whose settings changed, an
invalid one is logged and the running config stays (`infrapulse_config_last_reload_successful`
drops to 0). `--listen HOST:PORT` on the command line overrides `listen`.

Examples: [deploy/config/node.yaml](../deploy/config/node.yaml) (a GPU node) and
[deploy/config/fabric.yaml](../deploy/config/fabric.yaml) (a gNMI fabric collector).

| key | type | default | meaning |
| --- | --- | --- | --- |
"""


def load_everything() -> None:
    """Import every module that declares families, so the catalogue is complete."""
    from .sources import registry

    registry()
    importlib.import_module("infrapulse.metrics")
    importlib.import_module("infrapulse.httpguard")
    importlib.import_module("infrapulse.health.families")
    importlib.import_module("infrapulse.health.service")
    importlib.import_module("infrapulse.inspect.service")


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def metrics_markdown() -> str:
    load_everything()
    by_source: dict[str, list[catalog.Family]] = {}
    for family in catalog.all_families():
        by_source.setdefault(family.source or "other", []).append(family)
    out = [METRICS_HEADER]
    for source in sorted(by_source):
        out.append(f"## Source `{source}`\n\n| family | type | unit | labels | meaning |\n"
                   "| --- | --- | --- | --- | --- |\n")
        for f in by_source[source]:
            labels = ", ".join(f"`{x}`" for x in f.labels)
            if f.optional_labels:
                labels += (", " if labels else "") + ", ".join(f"`{x}`?" for x in f.optional_labels)
            out.append(f"| `{f.name}` | {f.type} | {f.unit or '-'} | {labels or '-'} | {_md(f.help)} |\n")
        out.append("\n")
    out.append("`label?` marks a label present only when the data has it.\n")
    out.append(promtool_section())
    return "".join(out)


# What `promtool check metrics` (Prometheus' naming lint) says about our exposition, and why each
# finding stays. tests/e2e/test_promtool_metrics.py runs promtool on a live demo daemon and
# compares its findings with this list, so a new finding must be fixed or explained here.
PROMTOOL_FINDINGS: tuple[tuple[str, str, str], ...] = (
    ("infrapulse_nic_fec_corrected_bits_total", 'use base unit "bytes" instead of "bits"',
     "It counts bit errors the FEC corrected, not data: a corrected bit is one event, and an eighth "
     "of a corrected byte means nothing. Divided by infrapulse_nic_received_bits_total it is the "
     "pre-FEC bit error ratio, the unit link error budgets are written in; in bytes both sides would "
     "only be rescaled."),
    ("infrapulse_nic_received_bits_total", 'use base unit "bytes" instead of "bits"',
     "The denominator of that bit error ratio, counted by the PHY in bits (mlx5 rx_bits_phy, bnxt_en "
     "rx_bits). Bytes received are in infrapulse_nic_phy_bytes_total already."),
    ("infrapulse_rdma_hw_counter_total", "metric name should not include type 'counter'",
     "`hw_counter` is the kernel's own name of the files it exports "
     "(/sys/class/infiniband/<device>/ports/<port>/hw_counters/<counter>), not the metric type; the "
     "`counter` label holds the file name. Renaming it would break every query that reads it."),
)


def promtool_section() -> str:
    rows = "".join(f"| `{name}` | {said} | {_md(why)} |\n" for name, said, why in PROMTOOL_FINDINGS)
    return ("\n## `promtool check metrics`\n\n"
            "Prometheus' naming lint, run on a live daemon's /metrics by "
            "`tests/e2e/test_promtool_metrics.py`, reports exactly these findings; each is kept on "
            "purpose:\n\n"
            "| family | promtool says | why it stays |\n| --- | --- | --- |\n" + rows)


def _default_text(decl: Field) -> str:
    if isinstance(decl, Section):
        return ""
    value = decl.default
    if value is None or value == [] or value == {}:
        return "-"
    if isinstance(decl, Duration) and not isinstance(value, str):
        value = format_duration(value)
    if isinstance(value, bool):
        value = str(value).lower()
    return f"`{value}`"


def configuration_markdown() -> str:
    from .config import root_schema

    load_everything()
    rows = [CONFIG_HEADER]
    for path, decl in walk(root_schema()):
        type_doc = decl.type_doc()
        if isinstance(decl, ListOf) and isinstance(decl.item, Section):
            type_doc = "list of mappings"
        required = " **(required)**" if decl.required else ""
        rows.append(f"| `{path}` | {_md(type_doc)} | {_default_text(decl)} | {_md(decl.doc)}{required} |\n")
    return "".join(rows)


def health_sections(doc: str) -> str:
    """docs/health.md with its generated sections (signal table, cross-instance PromQL) redone."""
    from .health import reference

    return reference.render(doc)


# Generated files: checkout-relative path -> renderer.
GENERATED: dict[str, Callable[[], str]] = {
    "docs/metrics.md": metrics_markdown,
    "docs/configuration.md": configuration_markdown,
}
# Hand-written files with generated sections between `<!-- generated:NAME -->` markers:
# checkout-relative path -> (committed text -> text with the sections redone).
GENERATED_SECTIONS: dict[str, Callable[[str], str]] = {
    "docs/health.md": health_sections,
}


def find_checkout(start: Path) -> Path | None:
    """The infrapulse source checkout holding `start` (a directory), or None when there is none."""
    for folder in (start, *start.parents):
        if (folder / "exporter" / "infrapulse" / "__init__.py").is_file() and (folder / SCRIPT).is_file():
            return folder
    return None


def cmd_docs(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve() if args.root else find_checkout(Path.cwd().resolve())
    if root is None or not (root / SCRIPT).is_file():
        where = f"--root {args.root}" if args.root else f"{Path.cwd()} (or a parent)"
        print(f"infrapulse docs: {where} is not an infrapulse source checkout (no {SCRIPT}); the generated "
              "docs live in the repository: run this from a checkout or pass --root DIR", file=sys.stderr)
        return 2
    argv = [sys.executable, str(root / SCRIPT)] + ([] if args.write else ["--check"])
    return subprocess.run(argv, cwd=root).returncode


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("docs", help="regenerate or check docs/metrics.md, docs/configuration.md and "
                                         "the generated sections of docs/health.md",
                            description="Regenerate (--write) or check (default) the generated reference "
                                        "docs of an infrapulse source checkout (runs its "
                                        "scripts/generate_docs.py).")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write the files instead of checking them")
    mode.add_argument("--check", action="store_true", help="exit 1 when a file is out of date (the default)")
    parser.add_argument("--root", metavar="DIR",
                        help="the source checkout (default: the current directory or its nearest "
                             "parent that is one)")
    parser.set_defaults(func=cmd_docs)
