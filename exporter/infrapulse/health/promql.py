"""PromQL for the health score across instances: the topology join and the cluster score.

Inside one daemon that runs both roles the topology signals are computed in-process
(signals.py). When node and fabric run as separate instances, only Prometheus sees both
sides, so the same join is written here as PromQL. The alerting rules (alerts/) carry these
expressions as recording rules; tests/e2e/test_health_promql.py runs them through
`promtool test rules`, and docs/health.md shows them.

Joins:
* a node instance exports `infrapulse_node_info{hostname, role}`;
* a fabric instance exports `infrapulse_switch_lldp_neighbor_info{switch, interface,
  neighbor_system, neighbor_port}` for every switch port, and the port's queue/PFC counters.
Host names are compared on their first DNS label (`gpu-node-01.example.net` matches
`gpu-node-01`), as in-process; PromQL cannot fold case, so both sides must agree on it.
"""

from __future__ import annotations

from .signals import SIGNALS

# The first DNS label of a host name, as label `host`.
_SHORT_HOST = '"host", "$1", "{label}", "([^.]+).*"'


def _served_by_port(per_port: str) -> str:
    """Per node instance: the max of a per-(switch, interface) vector over the ports whose LLDP
    neighbour is that node."""
    return f"""max by (job, instance, hostname) (
  label_replace(infrapulse_node_info{{role=~"node|both"}}, {_SHORT_HOST.format(label="hostname")})
  * on (host) group_left ()
  max by (host) (
    label_replace(
      max by (switch, interface, neighbor_system) (infrapulse_switch_lldp_neighbor_info)
      * on (switch, interface) group_left ()
      ({per_port}),
      {_SHORT_HOST.format(label="neighbor_system")}
    )
  )
)"""


def uplink_ecn_marked_ratio(window: str = "1m") -> str:
    """Worst ECN-marked ratio over the queues of the switch ports serving each node."""
    return _served_by_port(f"""max by (switch, interface) (
    sum by (switch, interface, queue) (rate(infrapulse_switch_queue_ecn_marked_packets_total[{window}]))
    / (
      sum by (switch, interface, queue) (rate(infrapulse_switch_queue_transmitted_packets_total[{window}]))
      > 0
    )
  )""")


def uplink_pfc_pause_ratio(window: str = "1m") -> str:
    """Worst PFC pause-time ratio (any priority, either direction) of the ports serving each node."""
    return _served_by_port(f"""max by (switch, interface) (
    clamp_max(
      sum by (switch, interface, priority, direction) (
        rate(infrapulse_switch_pfc_pause_duration_seconds_total[{window}])
      ), 1
    )
  )""")


def subscore(expr: str, good: float, bad: float) -> str:
    """The piecewise-linear curve of scoring.curve() in PromQL (good < bad)."""
    return f"clamp(100 * ({bad:g} - ({expr})) / {bad - good:g}, 0, 100)"


def topology_score(window: str = "1m", ecn: tuple[float, float] | None = None,
                   pfc: tuple[float, float] | None = None) -> str:
    """The topology component per node instance: the mean of the uplink sub-scores it has
    (equal weights, as the in-process defaults), each sub-score that of the worst port."""
    ecn = ecn or (SIGNALS["ecn_marked_ratio"].good, SIGNALS["ecn_marked_ratio"].bad)
    pfc = pfc or (SIGNALS["pfc_pause_ratio"].good, SIGNALS["pfc_pause_ratio"].bad)
    ecn_score = subscore(uplink_ecn_marked_ratio(window), *ecn)
    pfc_score = subscore(uplink_pfc_pause_ratio(window), *pfc)
    return f"""avg by (job, instance, hostname) (
  label_replace({ecn_score}, "signal", "uplink_ecn_marked_ratio", "", "")
  or
  label_replace({pfc_score}, "signal", "uplink_pfc_pause_ratio", "", "")
)"""


# Cluster score per role: the coverage-weighted mean over instances (an instance that knows
# little about itself counts little), capped at the worst instance + CLUSTER_HEADROOM, so one
# instance at 0 holds its role's cluster score at <= 50 however many healthy ones surround it.
# Instances of role "both" form their own group, as infrapulse_node_info reports them.
CLUSTER_HEADROOM = 50

CLUSTER_WEIGHTED_MEAN = """sum by (role) (
  infrapulse_health_score * on (job, instance) infrapulse_health_coverage_ratio
  * on (job, instance) group_left (role) infrapulse_node_info
)
/ (
  sum by (role) (
    infrapulse_health_coverage_ratio * on (job, instance) group_left (role) infrapulse_node_info
  ) > 0
)"""

CLUSTER_MIN = """min by (role) (
  infrapulse_health_score * on (job, instance) group_left (role) infrapulse_node_info
)"""

CLUSTER_SCORE = f"""(
  role:infrapulse_health_score:weighted_mean
  < (role:infrapulse_health_score:min + {CLUSTER_HEADROOM})
)
or
((role:infrapulse_health_score:min + {CLUSTER_HEADROOM}) and role:infrapulse_health_score:weighted_mean)"""


# The daemons' own status bands per role (health.status_thresholds, exported by every instance):
# the strictest instance of a role sets the bands its cluster score is alerted on.
ROLE_STATUS_THRESHOLD = """max by (role, status) (
  infrapulse_health_status_threshold * on (job, instance) group_left (role) infrapulse_node_info
)"""


# The cluster view of the status: per role, how many instances are in each status (the daemons'
# own word, docs/health.md step 6: the worst of the score's band and each signal's state).
ROLE_STATUS_COUNT = """sum by (role, status) (
  infrapulse_health_status * on (job, instance) group_left (role) infrapulse_node_info
)"""


def recording_rules(window: str = "1m") -> list[dict[str, str]]:
    """The rules as Prometheus rule-file entries (record name -> expression), in dependency order."""
    return [
        {"record": "instance:infrapulse_health_uplink_ecn_marked_ratio:max",
         "expr": uplink_ecn_marked_ratio(window)},
        {"record": "instance:infrapulse_health_uplink_pfc_pause_ratio:max",
         "expr": uplink_pfc_pause_ratio(window)},
        {"record": "instance:infrapulse_health_topology_score:mean", "expr": topology_score(window)},
        {"record": "role:infrapulse_health_score:weighted_mean", "expr": CLUSTER_WEIGHTED_MEAN},
        {"record": "role:infrapulse_health_score:min", "expr": CLUSTER_MIN},
        {"record": "role:infrapulse_health_score:cluster", "expr": CLUSTER_SCORE},
        {"record": "role:infrapulse_health_status_threshold:max", "expr": ROLE_STATUS_THRESHOLD},
        {"record": "role:infrapulse_health_status:sum", "expr": ROLE_STATUS_COUNT},
    ]
