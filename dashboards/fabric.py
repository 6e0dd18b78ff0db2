"""Fabric / NOC: switch PFC, ECN, queues, links and LLDP over gNMI; the RDMA NIC side per node; the
latency mesh between the nodes (dashboards/mesh.py)."""

from __future__ import annotations

from grafana import Dashboard, alert_annotation, heatmap, query_variable, row, stat, table, target, timeseries
from mesh import panels as mesh_panels
from promql import SCOPE, by, increase, rate, sel

UID = "infrapulse-fabric"

# Switch series are selected by the fabric instance plus the switch and interface variables.
SWITCH = {**SCOPE, "switch": "$switch", "interface": "$interface"}
# Per-switch series (no interface label) are selected by the switch variable alone.
ONE_SWITCH = {**SCOPE, "switch": "$switch"}


def sw(metric: str, **extra: str) -> str:
    return sel(metric, SWITCH, **extra)


MINORITY = "instance_interface_parameter:infrapulse_nic_roce_cc_parameter_minority:bool"


def _config_matrix(title: str, description: str, value_field: str, highlight: bool) -> dict:
    """Node x parameter: one row per node and netdev ("instance interface"), one column per DCQCN
    parameter, from the per-parameter minority recording rule (its `value` label is the value)."""
    expr = (f'label_join(max by (instance, interface, parameter, value) ({sel(MINORITY)}), '
            f'"netdev", " ", "instance", "interface")')
    panel = table(title, description, [target(expr, instant=True, table=True)], width=12, height=10)
    panel["transformations"] = [
        {"id": "groupingToMatrix", "options": {"columnField": "parameter", "rowField": "netdev",
                                               "valueField": value_field}},
    ]
    if highlight:
        panel["fieldConfig"]["defaults"]["custom"] = {"cellOptions": {"type": "color-background"}}
        panel["fieldConfig"]["defaults"]["thresholds"] = {"mode": "absolute", "steps": [
            {"color": "transparent", "value": None}, {"color": "red", "value": 1}]}
    return panel


def config_matrices() -> list[dict]:
    return [
        _config_matrix(
            "RoCE config matrix (node x parameter)",
            "The DCQCN parameters (infrapulse_nic_roce_cc_parameter) of every RoCE netdev: one row per node "
            "and netdev, one column per parameter. The panel beside it marks the values that are a "
            "minority in the fleet.",
            "value", highlight=False),
        _config_matrix(
            "RoCE config matrix: minority values",
            "Same rows and columns: 1 (red) where the netdev's value is shared by fewer netdevs than the "
            "parameter's most common value in the fleet (recording rule "
            "instance_interface_parameter:infrapulse_nic_roce_cc_parameter_minority:bool).",
            "Value", highlight=True),
    ]


def build() -> Dashboard:
    panels = [
        row("Switches"),
        stat("Switches streaming",
             "Switches whose gNMI stream is established and synced (infrapulse_switch_up == 1).",
             [target(f"sum({sel('infrapulse_switch_up', ONE_SWITCH)})")], "none"),
        stat("Switches down",
             "Configured switches whose gNMI stream is down (connect failure, authentication, stall).",
             [target(f"count({sel('infrapulse_switch_up', ONE_SWITCH)} == 0)"
                     " or vector(0)")],
             "none", steps=[{"color": "green", "value": None}, {"color": "red", "value": 1}]),
        stat("Ports operationally down",
             "Switch ports of the selection whose oper-status is not UP.",
             [target(f"count({sw('infrapulse_switch_interface_oper_up')} == 0) or vector(0)")],
             "none", steps=[{"color": "green", "value": None}, {"color": "orange", "value": 1}]),
        stat("Links flapping (10m)",
             "Ports with at least one carrier transition in the last 10 minutes.",
             [target("count("
                     f"{increase(sw('infrapulse_switch_interface_carrier_transitions_total'), '10m')} > 0)"
                     " or vector(0)")],
             "none", steps=[{"color": "green", "value": None}, {"color": "red", "value": 1}]),
        timeseries("gNMI updates per switch",
                   "Telemetry updates received per second from each switch; a drop to zero with the "
                   "stream still up means the switch stopped sampling.",
                   [target(by("switch", rate(sel("infrapulse_switch_updates_total", ONE_SWITCH))),
                           "{{switch}}")], "cps", min=0),
        timeseries("Time since last update",
                   "Seconds since each switch last sent an update (on-change paths may be quiet; sampled "
                   "counters should update every sample interval).",
                   [target(f"time() - {sel('infrapulse_switch_last_update_timestamp_seconds', ONE_SWITCH)}",
                           "{{switch}}")], "s", min=0),
        row("Priority flow control (switch)"),
        timeseries("PFC pause frames by priority",
                   "PFC pause frames per second per switch port and priority. rx = the port was paused "
                   "by its neighbour, tx = the switch paused the neighbour (its buffer filled). Lossless "
                   "RoCE traffic usually runs on priority 3.",
                   [target(by("switch, interface, priority, direction",
                              rate(sw("infrapulse_switch_pfc_pause_frames_total"))),
                           "{{switch}} {{interface}} p{{priority}} {{direction}}")], "pps", min=0),
        timeseries("PFC pause time ratio",
                   "Fraction of time each switch port spent paused per priority (pause duration / wall "
                   "time), where the switch reports durations. Sustained values above a few percent "
                   "throttle the RDMA flows behind that port. 5-minute rate (recording rule, as alerted on).",
                   [target(by("switch, interface, priority, direction",
                              sw("switch_interface_priority_direction:infrapulse_switch_pfc_pause_duration_seconds:rate5m"),
                              "max"),
                           "{{switch}} {{interface}} p{{priority}} {{direction}}")],
                   "percentunit", min=0),
        timeseries("PFC watchdog storms",
                   "PFC storms the switch's PFC watchdog detected and restored per lossless queue in the "
                   "last 10 minutes. A detected storm means the watchdog is dropping (or forwarding "
                   "without flow control) that queue's traffic until it restores it: the alert "
                   "InfrapulseSwitchPfcWatchdogStorm.",
                   [target(by("switch, interface, queue",
                              increase(sw("infrapulse_switch_pfc_watchdog_storms_detected_total"), "10m")),
                           "detected {{switch}} {{interface}} q{{queue}}"),
                    target(by("switch, interface, queue",
                              increase(sw("infrapulse_switch_pfc_watchdog_storms_restored_total"), "10m")),
                           "restored {{switch}} {{interface}} q{{queue}}")], "short", min=0),
        row("ECN and queues (switch)"),
        timeseries("ECN-marked ratio per queue",
                   "ECN-marked packets / transmitted packets per switch egress queue. Marking is DCQCN's "
                   "early congestion signal: a ratio of a few percent means the queue is congested and "
                   "senders are slowing down. 5-minute ratio (recording rule, the series the ECN alerts "
                   "use).",
                   [target(by("switch, interface, queue",
                              sw("switch_interface_queue:infrapulse_switch_queue_ecn_marked_per_transmitted_packets:"
                                 "ratio_rate5m"), "max"),
                           "{{switch}} {{interface}} q{{queue}}")], "percentunit", min=0),
        heatmap("Queue depth distribution",
                "Distribution of instantaneous egress queue depths across the selected ports and queues "
                "per time step: mass moving up means buffers are filling fabric-wide.",
                [target(sw("infrapulse_switch_queue_depth_bytes"), "{{switch}} {{interface}} q{{queue}}")],
                "bytes"),
        timeseries("Queue watermarks",
                   "Peak queue occupancy per port (highest queue) where the switch reports watermarks.",
                   [target(by("switch, interface", sw("infrapulse_switch_queue_watermark_bytes"), "max"),
                           "{{switch}} {{interface}}")], "bytes", min=0),
        timeseries("Queue drops",
                   "Packets dropped per second per egress queue: on a lossless queue any drop is a "
                   "misconfiguration (PFC not protecting that priority).",
                   [target(by("switch, interface, queue",
                              sw("switch_interface_queue:infrapulse_switch_queue_dropped_packets:rate5m")),
                           "{{switch}} {{interface}} q{{queue}}")], "pps", min=0),
        timeseries("WRED drops per queue",
                   "Packets per second an egress queue dropped early by WRED, before it was full (part of "
                   "the queue drops above). On a queue that also ECN-marks, WRED drops mean the marking "
                   "thresholds are too high or the senders do not react (DCQCN off).",
                   [target(by("switch, interface, queue",
                              rate(sw("infrapulse_switch_queue_wred_dropped_packets_total"))),
                           "{{switch}} {{interface}} q{{queue}}")], "pps", min=0),
        timeseries("Ingress headroom watermark",
                   "Peak use of the PFC headroom per ingress priority group (the buffer that absorbs what "
                   "is in flight after the switch sends a pause): close to the configured headroom, "
                   "lossless traffic is about to be dropped at ingress. The switch's watermark period "
                   "peak (SONiC 202511+: 120 s).",
                   [target(by("switch, interface, priority_group",
                              sw("infrapulse_switch_priority_group_watermark_bytes", pool="=headroom"),
                              "max"),
                           "{{switch}} {{interface}} pg{{priority_group}}")], "bytes", min=0),
        row("Links (switch)"),
        timeseries("Port throughput",
                   "Bytes per second received (rx) and transmitted (tx) per switch port.",
                   [target(by("switch, interface",
                              rate(sw("infrapulse_switch_interface_received_bytes_total"))),
                           "{{switch}} {{interface}} rx"),
                    target(by("switch, interface",
                              rate(sw("infrapulse_switch_interface_transmitted_bytes_total"))),
                           "{{switch}} {{interface}} tx")], "Bps", min=0),
        timeseries("Link errors and discards",
                   "Interface errors, discards and FCS errors per second. FCS errors on a link that stays "
                   "up are the half-dead-link smell (dirty optics, bad cable).",
                   [target(by("switch, interface, direction",
                              rate(sw("infrapulse_switch_interface_errors_total"))),
                           "errors {{switch}} {{interface}} {{direction}}"),
                    target(by("switch, interface, direction",
                              rate(sw("infrapulse_switch_interface_discards_total"))),
                           "discards {{switch}} {{interface}} {{direction}}"),
                    target(by("switch, interface", rate(sw("infrapulse_switch_interface_fcs_errors_total"))),
                           "fcs {{switch}} {{interface}}")], "pps", min=0),
        timeseries("Carrier transitions (link flaps)",
                   "Carrier transitions per port over the last 10 minutes; 3 or more is a flapping link.",
                   [target(by("switch, interface",
                              sw("switch_interface:infrapulse_switch_interface_carrier_transitions:increase10m")),
                           "{{switch}} {{interface}}")], "short", min=0),
        timeseries("Ports up per switch",
                   "Ports operationally up, against the ports the switch reports.",
                   [target(by("switch", sw("infrapulse_switch_interface_oper_up")), "{{switch}} up"),
                    target(by("switch",
                              sw("infrapulse_switch_interface_oper_up"), "count"), "{{switch}} total")],
                   "none", min=0),
        table("LLDP neighbours",
              "Which host and NIC port sits behind each switch port (LLDP). neighbor_system matches "
              "infrapulse_node_info{hostname} of the node instance, which joins node and fabric series.",
              [target(sw("infrapulse_switch_lldp_neighbor_info"), instant=True, table=True)],
              hide=("Time", "__name__", "Value"), width=24),
        row("RDMA NICs (node side)"),
        *config_matrices(),
        table("RoCE config: nodes off the fleet's common configuration",
              "Per netdev: its configuration hash, 1 when fewer nodes run that hash than the most common "
              "one (recording rule instance_interface:infrapulse_nic_roce_config_minority:bool; a tie "
              "flags none), and the firmware and driver it runs.",
              [target(by("instance, interface, hash",
                         sel("instance_interface:infrapulse_nic_roce_config_minority:bool")),
                      instant=True, table=True),
               target(by("instance, interface, firmware_version, driver_version",
                         sel("infrapulse_nic_firmware_info")), instant=True, table=True)],
              hide=("Time", "__name__", "Value #B")),
        timeseries("CNPs sent and handled",
                   "Congestion notification packets per second per RDMA port: sent by the receiver's NIC "
                   "when ECN-marked packets arrive, handled by the sender's NIC (which then cuts its "
                   "rate). The NIC-side echo of switch ECN marking. Sent: 5-minute rate (recording rule).",
                   [target(by("instance, device, port",
                              sel("instance_device_port:infrapulse_rdma_cnp_sent:rate5m")),
                           "sent {{instance}} {{device}}/{{port}}"),
                    target(by("instance, device, port", rate(sel("infrapulse_rdma_cnp_handled_total"))),
                           "handled {{instance}} {{device}}/{{port}}")], "pps", min=0),
        timeseries("ECN-marked packets received",
                   "RoCE packets arriving ECN-marked per RDMA port (np_ecn_marked_roce_packets), and per "
                   "NIC priority from the driver statistics.",
                   [target(by("instance, device, port",
                              rate(sel("infrapulse_rdma_ecn_marked_packets_total"))),
                           "{{instance}} {{device}}/{{port}}"),
                    target(by("instance, interface, priority",
                              rate(sel("infrapulse_nic_ecn_marked_packets_total"))),
                           "{{instance}} {{interface}} p{{priority}}")], "pps", min=0),
        timeseries("NIC ECN-marked ratio per priority",
                   "ECN-marked packets / packets received per NIC priority, 5-minute ratio (recording "
                   "rule, the series the NIC ECN alerts use).",
                   [target(by("instance, interface, priority",
                              sel("instance_interface_priority:infrapulse_nic_ecn_marked_per_received_packets:"
                                  "ratio_rate5m"), "max"),
                           "{{instance}} {{interface}} p{{priority}}")], "percentunit", min=0),
        timeseries("RDMA retransmissions",
                   "Retransmission-related events per second per RDMA port and reason (sequence errors, "
                   "ACK timeouts, RNR NAKs, ...): packet loss or receiver stalls on the path.",
                   [target(by("instance, device, port, reason",
                              rate(sel("infrapulse_rdma_retransmission_events_total"))),
                           "{{instance}} {{device}}/{{port}} {{reason}}")], "cps", min=0),
        timeseries("RDMA error ratio",
                   "Receive errors plus transmit discards over all packets through each RDMA port, "
                   "5-minute ratio (recording rule; alerted above 0.1% for 5m).",
                   [target(by("instance, device, port",
                              sel("instance_device_port:infrapulse_rdma_port_errors_per_packets:"
                                                            "ratio_rate5m"), "max"),
                           "{{instance}} {{device}}/{{port}}")], "percentunit", min=0),
        timeseries("NIC PFC pause frames",
                   "PFC pause frames per second per NIC interface and priority (rx: the switch paused "
                   "this NIC; tx: this NIC paused the switch because its receive buffer filled).",
                   [target(by("instance, interface, priority, direction",
                              rate(sel("infrapulse_nic_pfc_pause_frames_total"))),
                           "{{instance}} {{interface}} p{{priority}} {{direction}}")], "pps", min=0),
        timeseries("NIC PFC pause time ratio",
                   "Fraction of time each NIC priority spent paused (pause duration / wall time).",
                   [target(by("instance, interface, priority, direction",
                              rate(sel("infrapulse_nic_pfc_pause_duration_seconds_total")), "max"),
                           "{{instance}} {{interface}} p{{priority}} {{direction}}")], "percentunit", min=0),
        timeseries("RDMA port throughput",
                   "Bytes per second received and transmitted per RDMA port (PMA counters).",
                   [target(by("instance, device, port",
                              rate(sel("infrapulse_rdma_port_received_bytes_total"))),
                           "rx {{instance}} {{device}}/{{port}}"),
                    target(by("instance, device, port",
                              rate(sel("infrapulse_rdma_port_transmitted_bytes_total"))),
                           "tx {{instance}} {{device}}/{{port}}")], "Bps", min=0),
        timeseries("RDMA port errors",
                   "Symbol errors, receive errors, link-downed events and out-of-buffer drops per second "
                   "per RDMA port.",
                   [target(by("instance, device, port",
                              rate(sel("infrapulse_rdma_port_symbol_errors_total"))),
                           "symbol {{instance}} {{device}}/{{port}}"),
                    target(by("instance, device, port",
                              rate(sel("infrapulse_rdma_port_receive_errors_total"))),
                           "rcv {{instance}} {{device}}/{{port}}"),
                    target(by("instance, device, port", rate(sel("infrapulse_rdma_port_link_downed_total"))),
                           "link downed {{instance}} {{device}}/{{port}}"),
                    target(by("instance, device, port", rate(sel("infrapulse_rdma_out_of_buffer_total"))),
                           "out of buffer {{instance}} {{device}}/{{port}}")], "cps", min=0),
        timeseries("RDMA ports ACTIVE",
                   "RDMA ports in state ACTIVE (4) against all ports, per node.",
                   [target(by("instance",
                              f"{sel('infrapulse_rdma_port_state')} == bool 4"), "{{instance}} active"),
                    target(by("instance", sel("infrapulse_rdma_port_state"), "count"), "{{instance}} total")],
                   "none", min=0),
        timeseries("NIC kernel-log events",
                   "mlx5/bnxt driver events in the kernel log (kmsg source) over the last 10 minutes, "
                   "per PCI function: firmware health (scored: kmsg_nic_fault), command and TX timeouts, "
                   "CQE errors, "
                   "bnxt errors, module events. Link up/down are not scored here: the link counters "
                   "above are (docs/kmsg.md).",
                   [target(by("instance, kind, pci_address",
                              increase(sel("infrapulse_kmsg_events_total",
                                           kind="mlx5_health_compromised|mlx5_fw_error|mlx5_cmd_timeout|"
                                                "cqe_error|tx_timeout|bnxt_error|module_plugged|"
                                                "module_unplugged|module_error|link_up|link_down|link_init"),
                                       "10m")),
                           "{{instance}} {{pci_address}} {{kind}}")], "short", min=0),
        *mesh_panels(),
    ]
    return Dashboard(
        uid=UID, title="infrapulse / Fabric (NOC)",
        description="Lossless-fabric health for the network team: switch PFC, ECN marking, queue depth, "
                    "drops, link errors and flaps, LLDP neighbours, and the RDMA NIC side on every node.",
        tags=["fabric", "noc"],
        variables=[
            query_variable("job", "label_values(infrapulse_build_info, job)"),
            query_variable("instance", 'label_values(infrapulse_build_info{job=~"$job"}, instance)'),
            query_variable("switch", 'label_values(infrapulse_switch_up{job=~"$job", instance=~"$instance"}, '
                                     'switch)'),
            query_variable("interface", 'label_values(infrapulse_switch_interface_oper_up{job=~"$job", '
                                        'instance=~"$instance", switch=~"$switch"}, interface)'),
        ],
        panels=panels,
        annotations=[alert_annotation("Network alerts", 'ALERTS{alertstate="firing", team="noc"}', "red")],
    )
