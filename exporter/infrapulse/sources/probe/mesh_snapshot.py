"""The series a mesh source publishes, read off its prober, peer list, responder and sockets.

Built once per publication, never per packet: the p99 windows are trimmed here (PeerStats.p99).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from ...store import Snapshot
from . import mesh_families as fam
from . import mesh_peers as mp
from .mesh_config import MeshSettings
from .mesh_prober import Prober
from .mesh_socket import MeshSocket


def snapshot(prober: Prober, peers: mp.PeerSet, sockets: Iterable[MeshSocket],
             config: MeshSettings) -> Snapshot:
    now = time.monotonic()
    snap = Snapshot()
    for label, stats in prober.stats.items():
        snap.add(fam.SENT, (label,), float(stats.sent))
        snap.add(fam.LOST, (label,), float(stats.lost))
        snap.add(fam.UNTIMED, (label,), float(stats.untimed))
        p99 = stats.p99(now, config.p99_window, config.min_samples)
        if p99 is not None:
            snap.add(fam.RTT_P99, (label,), p99)
    for group, hist in prober.histograms.items():
        snap.add(fam.RTT, (group,), hist.value())
        snap.add(fam.PROBED_PEERS, (group,), float(sum(p.group == group for p in peers.probed)))
    for source, count in peers.by_source.items():
        snap.add(fam.PEERS, (source,), float(count))
    for outcome in fam.RESPONDER_OUTCOMES:
        snap.add(fam.RESPONDER_REQUESTS, (outcome,), float(prober.responder.outcomes.get(outcome, 0)))
    for msock in sockets:
        local = msock.local
        snap.add(fam.LOCAL_ADDRESS, (local.interface, local.ip, str(config.dscp)), 1.0)
    return snap
