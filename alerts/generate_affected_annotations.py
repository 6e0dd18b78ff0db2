#!/usr/bin/env python3
"""Give every fabric, link, RDMA, RoCE, GPU, probe and mesh alert an `affected` annotation: the
workloads its target's fault hurts, read at notification time from the workload join series
(docs/attribution.md) — the same chain as the health API's detractors (health/blast.py):

    switch port  -> the node NIC it faces (LLDP): the recording rule
                    switch_interface_kind_workload:infrapulse_workload_switch_port:info
    a whole switch -> the workloads behind every one of its ports
    GPU          -> infrapulse_workload_gpu_info{instance, gpu}
    NIC netdev   -> infrapulse_workload_nic_info{instance, interface}
    RDMA device  -> infrapulse_workload_nic_info{instance, device}
    a node-wide finding (a probe, a mesh peer) -> the workloads on every RDMA NIC of that node

The template dispatches on the alert's own labels, so one template serves every rule; it names at
most 20 workloads (with the total beside them), "none" where the node attributes and nothing runs
there, and "unknown (...)" where nothing attributes — never an empty "none" for a node that
cannot tell.

    python alerts/generate_affected_annotations.py           # rewrite alerts/*.rules.yaml
    python alerts/generate_affected_annotations.py --check   # exit 1 naming the rules that differ

Run it before alerts/generate_prometheusrule.py (which copies the rule files into
deploy/kubernetes/); `make generate` runs them in order.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ALERTS_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(ALERTS_DIR.parent / "exporter"))
from infrapulse.health.affected_annotation import rewrite  # noqa: E402

# Rule files whose alerts concern a node device, a switch or a node's fabric. Serving alerts name
# their endpoint (the workload itself); health, sharding and inspection alerts concern infrapulse.
# link.rules.yaml gets it from alerts/generate_link_rules.py, which renders that file whole.
FILES = ("gpu", "mesh", "network", "probe", "rdma", "roce")


def rule_files(alerts_dir: Path = ALERTS_DIR) -> list[Path]:
    return [alerts_dir / f"{name}.rules.yaml" for name in FILES]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if a rule file is not current")
    args = parser.parse_args(argv)
    stale = []
    for path in rule_files():
        text = path.read_text()
        new = rewrite(text)
        if new == text:
            continue
        if args.check:
            stale.append(path.name)
        else:
            path.write_text(new)
            print(f"wrote {path.relative_to(ALERTS_DIR.parent)}")
    if stale:
        print(f"affected annotations out of date in {', '.join(stale)} "
              "(run: python alerts/generate_affected_annotations.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
