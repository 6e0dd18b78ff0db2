"""Correlation: a node's serving latency and the congestion of the switch ports that serve it.

The join is LLDP: a switch port whose `infrapulse_switch_lldp_neighbor_info{neighbor_system}`
equals a node instance's `infrapulse_node_info{hostname}` serves that node. The node and its
switches are usually scraped from different instances (node DaemonSet vs fabric collectors),
so these queries join across instances on purpose and carry no `instance` matcher.
"""

from __future__ import annotations

from grafana import Dashboard, alert_annotation, query_variable, row, table, target, timeseries
from promql import RATE_INTERVAL, by, increase, rate, ratio, sel

UID = "infrapulse-correlation"

JOB = {"job": "$job"}

# The scrape targets (job, instance) that run on the selected node.
NODE_INSTANCES = by("job, instance", sel("infrapulse_node_info", JOB, hostname="$node"), "max")

# LLDP neighbour series of the switch ports facing the selected node, with `hostname` copied from
# neighbor_system and kept only where an infrapulse node instance reports that hostname.
LLDP_TO_NODE = (
    f'label_replace({sel("infrapulse_switch_lldp_neighbor_info", JOB)}, '
    f'"hostname", "$1", "neighbor_system", "(.+)")\n'
    f"* on (hostname) group_left ()\n"
    f"{by('hostname', sel('infrapulse_node_info', JOB, hostname='$node'), 'max')}"
)
NODE_PORTS = by("switch, interface, hostname", LLDP_TO_NODE, "max")


def on_node(expr: str) -> str:
    """Keep only the series of `expr` scraped from an instance running on the selected node."""
    return f"{expr}\n* on (job, instance) group_left ()\n{NODE_INSTANCES}"


def on_node_ports(expr: str) -> str:
    """Keep only the (switch, interface) series of `expr` on ports facing the selected node."""
    return f"({expr})\n* on (switch, interface) group_left (hostname)\n{NODE_PORTS}"


def node_quantile(q: float, histogram: str) -> str:
    buckets = rate(sel(f"{histogram}_bucket", {**JOB, "endpoint": "$endpoint"}))
    return f"histogram_quantile({q:g}, sum by (le, endpoint) (\n{on_node(buckets)}\n))"


ECN_RATIO = on_node_ports(ratio(sel("infrapulse_switch_queue_ecn_marked_packets_total", JOB),
                                sel("infrapulse_switch_queue_transmitted_packets_total", JOB),
                                "switch, interface"))
PFC_RATIO = on_node_ports(by("switch, interface",
                             rate(sel("infrapulse_switch_pfc_pause_duration_seconds_total", JOB)), "max"))
PFC_FRAMES = on_node_ports(by("switch, interface, priority, direction",
                              rate(sel("infrapulse_switch_pfc_pause_frames_total", JOB))))


def latency_vs_fabric(title: str, description: str, histogram: str) -> dict:
    return timeseries(
        title, description,
        [target(node_quantile(0.95, histogram), "p95 {{endpoint}}"),
         target(ECN_RATIO, "ECN-marked {{switch}} {{interface}}"),
         target(PFC_RATIO, "PFC paused {{switch}} {{interface}}")],
        "s", min=0, right_axis={"B": "percentunit", "C": "percentunit"}, width=24, height=10)


def link_events_vs_ttft() -> dict:
    """The node's link events on a timeline beside its TTFT: a flapping or half-dead NIC shows as
    carrier changes or retrains lined up with the latency swings."""
    def events(family: str) -> str:
        return by("interface", on_node(increase(sel(family, JOB), RATE_INTERVAL)))

    return timeseries(
        "Link events (flaps, retrains) beside TTFT on $node",
        "Left axis: time-to-first-token p95 of the node's endpoints. Right axis: per NIC, carrier "
        "changes (sysfs carrier_changes: a flap is two), PHY link-down events and retrains that kept "
        "the carrier up (mlx5 total_success_recovery_phy: a half-dead link), per rate interval. TTFT "
        "swinging with retrains while the switch reports nothing is a half-dead link "
        "(InfrapulseNicLinkHalfDead); with carrier changes, a flapping one (InfrapulseNicLinkFlapping).",
        [target(node_quantile(0.95, "infrapulse_llm_time_to_first_token_seconds"), "p95 {{endpoint}}"),
         target(events("infrapulse_nic_carrier_changes_total"), "carrier changes {{interface}}"),
         target(events("infrapulse_nic_link_down_events_total"), "link-down events {{interface}}"),
         target(events("infrapulse_nic_link_recoveries_total"), "retrains (carrier up) {{interface}}")],
        "s", min=0, right_axis={"B": "none", "C": "none", "D": "none"}, width=24, height=8)


def link_quality() -> dict:
    return timeseries(
        "NIC bit error ratios on $node",
        "Post-FEC BER (errors FEC could not correct over received bits; basis=speed: link speed x time "
        "where the driver counts no bits) and pre-FEC BER (FEC-corrected bits) per NIC, 10-minute "
        "windows, from the link recording rules, and InfiniBand symbol errors over the port rate. "
        "Post-FEC at or above 1e-12, or pre-FEC 10x its own "
        "previous hour, is a degraded link (InfrapulseNicLinkDegraded).",
        [target(on_node(sel("instance_interface_basis:infrapulse_nic_post_fec_ber:ratio_rate10m", JOB)),
                "post-FEC {{interface}} ({{basis}})"),
         target(on_node(sel("instance_interface_basis:infrapulse_nic_pre_fec_ber:ratio_rate10m", JOB)),
                "pre-FEC {{interface}} ({{basis}})"),
         target(on_node(sel("instance_device_port:infrapulse_rdma_port_post_fec_ber:ratio_rate10m", JOB)),
                "symbol errors/bit {{device}}/{{port}} (InfiniBand)")],
        "none", min=0)


def nic_temperatures() -> dict:
    return timeseries(
        "NIC and module temperatures on $node",
        "The NIC's hwmon channels (class/net/<if>/device/hwmon): the ASIC and, where the cage's "
        "module reports one, the transceiver module (mlx5 labels it with the firmware's sensor "
        "name or sensor<index>). A hot module explains a rising pre-FEC BER.",
        [target(by("interface, sensor", on_node(sel("infrapulse_nic_temperature_celsius", JOB)), "max"),
                "{{interface}} {{sensor}}")],
        "celsius")


def build() -> Dashboard:
    panels = [
        row("Serving latency against the fabric ($node)"),
        latency_vs_fabric(
            "TTFT p95 vs congestion on the switch ports serving $node",
            "Left axis: time-to-first-token p95 of the serving endpoints on the node. Right axis: "
            "ECN-marked ratio and PFC pause-time ratio of the switch ports whose LLDP neighbour is "
            "the node. TTFT rising together with marking or pausing points at the network; TTFT "
            "rising alone points at the engine (queueing, KV cache). Red marks are firing alerts.",
            "infrapulse_llm_time_to_first_token_seconds"),
        link_events_vs_ttft(),
        latency_vs_fabric(
            "ITL p95 vs congestion on the switch ports serving $node",
            "Left axis: inter-token latency p95 of the node's endpoints; right axis: ECN-marked and "
            "PFC pause-time ratios of the switch ports facing the node (same join as above). Decode "
            "with tensor or pipeline parallelism across nodes is sensitive to fabric congestion.",
            "infrapulse_llm_inter_token_latency_seconds"),
        row("Fabric side ($node)"),
        table("Switch ports serving $node",
              "Switch ports whose LLDP neighbour is the selected node, with the NIC port on the "
              "other end (infrapulse_switch_lldp_neighbor_info joined to infrapulse_node_info on "
              "neighbor_system = hostname).",
              [target(LLDP_TO_NODE, instant=True, table=True)], hide=("Time", "__name__", "Value")),
        timeseries("PFC pause frames on the ports serving $node",
                   "PFC pause frames per second by priority and direction on the switch ports facing "
                   "the node; works for switches that report frame counts but no pause durations.",
                   [target(PFC_FRAMES, "{{switch}} {{interface}} p{{priority}} {{direction}}")],
                   "pps", min=0),
        row("Node side ($node)"),
        timeseries("NIC congestion response on $node",
                   "CNPs handled (the NIC cut its sending rate after ECN marks) and RDMA retransmission "
                   "events per second on the node's RDMA ports.",
                   [target(by("device, port", on_node(rate(sel("infrapulse_rdma_cnp_handled_total", JOB)))),
                           "CNP handled {{device}}/{{port}}"),
                    target(by("device, port",
                              on_node(rate(sel("infrapulse_rdma_retransmission_events_total", JOB)))),
                           "retransmissions {{device}}/{{port}}")], "cps", min=0),
        timeseries("Requests waiting and KV cache on $node",
                   "Queued requests (left) and KV cache usage (right) of the node's endpoints: if these "
                   "rise with TTFT while the fabric is calm, the engine is saturated.",
                   [target(by("endpoint", on_node(sel("infrapulse_llm_requests_waiting",
                                                      {**JOB, "endpoint": "$endpoint"}))),
                           "waiting {{endpoint}}"),
                    target(by("endpoint", on_node(sel("infrapulse_llm_kv_cache_usage_ratio",
                                                      {**JOB, "endpoint": "$endpoint"})), "max"),
                           "KV cache {{endpoint}}")],
                   "none", min=0, right_axis={"B": "percentunit"}),
        timeseries("Worst switch-port congestion facing $node",
                   "The same LLDP join evaluated by the topology recording rules: the highest ECN-marked "
                   "ratio (left) and PFC pause-frame rate (right) over the switch ports facing the node, "
                   "5-minute windows. This is what the node's topology health signal and alerts see.",
                   [target(sel("instance:infrapulse_switch_queue_ecn_marked_per_transmitted_packets:max_ratio_rate5m",
                               JOB, hostname="$node"), "ECN-marked {{instance}}"),
                    target(sel("instance:infrapulse_switch_pfc_pause_frames:max_rate5m", JOB,
                               hostname="$node"),
                           "PFC frames {{instance}}")],
                   "percentunit", min=0, right_axis={"B": "pps"}),
        link_quality(),
        nic_temperatures(),
        row("Workloads on $node (blast radius)"),
        table("Workloads and the NIC each uses on $node",
              "The join series of the workload source (docs/attribution.md): each pod, Slurm job and "
              "serving endpoint on the node with the RDMA NIC nearest its GPUs. A fault on a NIC, or on "
              "the switch port facing it, hurts these workloads. Filtered by $workload.",
              [target(on_node(sel("infrapulse_workload_nic_info", JOB, workload="$workload")),
                      instant=True, table=True)], hide=("Time", "__name__", "Value", "job")),
        timeseries("RDMA retransmissions by workload on $node",
                   "Retransmission events per second on the NICs each workload uses (recording rule "
                   "instance_kind_workload:infrapulse_rdma_retransmission_events:rate5m, the NIC series "
                   "joined to infrapulse_workload_nic_info).",
                   [target(on_node(sel("instance_kind_workload:infrapulse_rdma_retransmission_events:rate5m",
                                       JOB, workload="$workload")), "{{kind}} {{workload}}")],
                   "cps", min=0),
        timeseries("Health components of $node",
                   "Network, RDMA, GPU and serving component scores of the node's instances (0-100).",
                   [target(by("component", on_node(sel("infrapulse_health_component_score", JOB)), "min"),
                           "{{component}}")], "none", min=0, max=100),
    ]
    return Dashboard(
        uid=UID, title="infrapulse / Correlation: serving latency vs fabric",
        description="Network and serving latency on the same panels: a node's TTFT/ITL against the ECN "
                    "marking and PFC pausing of the switch ports that serve it (LLDP join), with alerts.",
        tags=["correlation", "noc", "ml"],
        variables=[
            query_variable("job", "label_values(infrapulse_build_info, job)"),
            # node instances only: fabric collectors have their own infrapulse_node_info
            query_variable("node", 'label_values(infrapulse_node_info{job=~"$job", role=~"node|both"}, '
                                   'hostname)', multi=False),
            query_variable("endpoint", 'label_values(infrapulse_llm_endpoint_up{job=~"$job"}, endpoint)'),
            query_variable("workload", 'label_values(infrapulse_workload_nic_info{job=~"$job"}, workload)'),
        ],
        panels=panels,
        annotations=[
            alert_annotation("Network alerts", 'ALERTS{alertstate="firing", team="noc"}', "red"),
            alert_annotation("Serving alerts", 'ALERTS{alertstate="firing", team="ml"}', "orange"),
        ],
    )

