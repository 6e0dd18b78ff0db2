"""The `infrapulse_probe_mesh_*` families of the latency mesh (source `mesh`).

Cardinality is the design constraint: per peer only the sent and lost counters and one p99
gauge; the RTT distribution is a histogram per peer group (same_switch, other_switch, unknown),
so the series count grows with the peer bound `max_peers`, never with the cluster.
"""

from __future__ import annotations

from ... import catalog

SOURCE = "mesh"
PEER_GROUPS = ("same_switch", "other_switch", "unknown")
# RTT bucket bounds, seconds: a kernel-to-kernel UDP round trip on one switch is tens of
# microseconds, queueing behind PFC pauses or deep buffers reaches milliseconds.
RTT_BUCKETS = (10e-6, 20e-6, 50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 20e-3, 50e-3,
               100e-3, 250e-3, 1.0)
PEER_SOURCES = ("config", "file", "dns", "lldp")
RESPONDER_OUTCOMES = ("answered", "answered_late", "unlisted", "rate_limited", "malformed", "send_failed")

SENT = catalog.declare(
    "infrapulse_probe_mesh_sent_total", catalog.COUNTER,
    "Mesh probes sent to a peer (UDP, from the local RDMA netdev address nearest the peer).",
    ("peer",), source=SOURCE)
LOST = catalog.declare(
    "infrapulse_probe_mesh_lost_total", catalog.COUNTER,
    "Mesh probes to a peer that got no valid reply within the timeout (or could not be sent). "
    "Counted when the timeout expires, so lost/sent lags by at most one timeout.",
    ("peer",), source=SOURCE)
UNTIMED = catalog.declare(
    "infrapulse_probe_mesh_untimed_total", catalog.COUNTER,
    "Answered mesh probes to a peer that give no round-trip time: a host held a send more than "
    "200 us between its time stamp and the socket (another thread had the GIL, the scheduler ran "
    "something else), this one the probe or the peer the reply (it sent a late notice), so the "
    "RTT would have measured a host, not the path.",
    ("peer",), source=SOURCE)
RTT_P99 = catalog.declare(
    "infrapulse_probe_mesh_rtt_p99_seconds", catalog.GAUGE,
    "99th percentile (nearest rank) of the round-trip times to a peer over the last p99_window, "
    "answered probes only; absent until min_samples replies are in the window. The time the "
    "peer's responder held the request is subtracted.",
    ("peer",), unit="seconds", source=SOURCE)
RTT = catalog.declare(
    "infrapulse_probe_mesh_rtt_seconds", catalog.HISTOGRAM,
    "Round-trip times of answered mesh probes by peer group: same_switch (the peer hangs off one of "
    "this node's switches), other_switch, unknown (no switch known for the node or the peer).",
    ("peer_group",), unit="seconds", source=SOURCE)
PEERS = catalog.declare(
    "infrapulse_probe_mesh_peers", catalog.GAUGE,
    "Candidate peers each configured peer source yields (config, file, dns, lldp); a peer named by "
    "two sources counts in both. The responder answers every candidate.",
    ("source_of_peers",), source=SOURCE)
PROBED_PEERS = catalog.declare(
    "infrapulse_probe_mesh_probed_peers", catalog.GAUGE,
    "Peers probed after the max_peers bound, by peer group.",
    ("peer_group",), source=SOURCE)
RESPONDER_REQUESTS = catalog.declare(
    "infrapulse_probe_mesh_responder_requests_total", catalog.COUNTER,
    "Probe requests that reached this node's responder, by outcome: answered, answered_late (the "
    "reply's send was held up after its dwell was stamped: a late notice followed it), unlisted "
    "(the sender is no candidate peer: never answered), rate_limited, malformed, send_failed.",
    ("outcome",), source=SOURCE)
LOCAL_ADDRESS = catalog.declare(
    "infrapulse_probe_mesh_local_address_info", catalog.INFO,
    "A local address the mesh binds to (responder and prober): the netdev it belongs to (empty "
    "when configured by address) and the DSCP its probes carry.",
    ("interface", "address", "dscp"), source=SOURCE)
