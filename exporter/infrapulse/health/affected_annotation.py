"""The `affected` annotation of an alert rule: the workloads behind the alert's own target, read
by Prometheus at notification time from the workload join series (docs/attribution.md), through
the same chain as the health API's detractors (blast.py). One Go template per target kind, the
kind read from the labels the rule's other annotations name. alerts/generate_affected_annotations.py
writes it into the committed rule files; linkrules.py into the link rules it renders."""

from __future__ import annotations

import re

MAX_NAMED = 20  # as blast.MAX_NAMED
SWITCH_PORTS = "switch_interface_kind_workload:infrapulse_workload_switch_port:info"
KEY = "affected"

# Go text/template, as Prometheus expands annotations: $sel selects the target's join series; one
# query lists the workloads, named in name order (sorted here, not picked by topk: ties would make
# the choice arbitrary), the first MAX_NAMED of them and then how many there are. `{{-`/`-}}` trim
# the newlines between the lines.
TEMPLATE = """\
{{- $sel := SELECTOR -}}
{{- $found := query (printf "max by (kind, workload) (%s)" $sel) | sortByLabel "workload" -}}
{{- range $i, $w := $found -}}
  {{- if lt $i MAX_NAMED }}{{ if $i }}, {{ end }}{{ $w.Labels.kind }} {{ $w.Labels.workload }}{{ end -}}
{{- else }}NONE{{ end -}}
{{- if gt (len $found) MAX_NAMED }} (MAX_NAMED of {{ len $found }} named){{ end -}}"""

NODE_NONE = ('{{ if query (printf "infrapulse_workload_gpus{instance=%q}" $labels.instance) }}none'
             '{{ else }}unknown (no workload attribution on {{ $labels.instance }}){{ end }}')
NIC = 'printf "infrapulse_workload_nic_info{instance=%q, interface=%q}" $labels.instance $labels.interface'
DEVICE = 'printf "infrapulse_workload_nic_info{instance=%q, device=%q}" $labels.instance $labels.device'
# target kind -> (the selector expression, what to say when it selects nothing)
TARGETS: dict[str, tuple[str, str]] = {
    "switch port": (f'printf "{SWITCH_PORTS}{{switch=%q, interface=%q}}" $labels.switch $labels.interface',
                    "unknown (no attributed workload behind this switch port)"),
    "switch": (f'printf "{SWITCH_PORTS}{{switch=%q}}" $labels.switch',
               "unknown (no attributed workload behind its ports)"),
    "gpu": ('printf "infrapulse_workload_gpu_info{instance=%q, gpu=%q}" $labels.instance $labels.gpu',
            NODE_NONE),
    # rules over both NIC (netdev) and InfiniBand (RDMA device) ports
    "nic or rdma device": (f"(or (and $labels.interface ({NIC})) ({DEVICE}))", NODE_NONE),
    "nic": (NIC, NODE_NONE),
    "rdma device": (DEVICE, NODE_NONE),
    "node": ('printf "infrapulse_workload_nic_info{instance=%q}" $labels.instance', NODE_NONE),
}


def target_kind(labels: set[str]) -> str:
    """What an alert's target is, from the labels its annotations name."""
    if "switch" in labels:
        return "switch port" if "interface" in labels else "switch"
    if "gpu" in labels:
        return "gpu"
    if {"interface", "device"} <= labels:
        return "nic or rdma device"
    if "interface" in labels:
        return "nic"
    return "rdma device" if "device" in labels else "node"


def template(kind: str) -> str:
    selector, none = TARGETS[kind]
    return (TEMPLATE.replace("SELECTOR", selector).replace("NONE", none)
            .replace("MAX_NAMED", str(MAX_NAMED)))

ALERT = re.compile(r"^(?P<indent>\s*)-\s*alert:\s*(?P<name>\w+)\s*$")
ANNOTATIONS = re.compile(r"^(?P<indent>\s*)annotations:\s*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def rewrite(text: str) -> str:
    """The file with each alert's `affected` annotation (first in its annotations) set to the
    template for its target, read from the labels its other annotations name."""
    lines, out, i = text.splitlines(), [], 0
    in_alert = False
    while i < len(lines):
        line = lines[i]
        if ALERT.match(line):
            in_alert = True
        elif re.match(r"^\s*-\s*(record|name):", line):
            in_alert = False
        m = ANNOTATIONS.match(line)
        out.append(line)
        i += 1
        if not (m and in_alert):
            continue
        outer = len(m["indent"])
        key_indent = _indent(lines[i]) if i < len(lines) else outer + 2
        kept = []  # the other annotations, without a previous `affected` (its key line and block)
        while i < len(lines) and lines[i].strip() and _indent(lines[i]) > outer:
            if _indent(lines[i]) == key_indent and lines[i].lstrip().startswith(f"{KEY}:"):
                i += 1
                while i < len(lines) and lines[i].strip() and _indent(lines[i]) > key_indent:
                    i += 1
                continue
            kept.append(lines[i])
            i += 1
        labels = set(re.findall(r"\$labels\.(\w+)", "\n".join(kept)))
        out.append(" " * key_indent + f"{KEY}: |-")
        out.extend(" " * (key_indent + 2) + t for t in template(target_kind(labels)).splitlines())
        out.extend(kept)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")
