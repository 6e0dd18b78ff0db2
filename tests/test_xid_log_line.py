"""The XID log line names the GPU instance only under MIG (issue 19, item 7): NVML reports
0xFFFFFFFF for "no instance", which the line used to print as gpu_instance=4294967295."""

from __future__ import annotations

import logging

from infrapulse.sources.gpu.nvml_api import XidEvent
from infrapulse.sources.gpu.nvml_xid import XidWatcher


class _Api:
    def uuid(self, handle: object) -> str:
        return "GPU-aaaa"


def test_xid_log_line_prints_none_outside_mig_and_the_instance_under_it(caplog):
    watcher = XidWatcher(_Api(), logging.getLogger("test.xid"))
    with caplog.at_level(logging.WARNING, logger="test.xid"):
        watcher._count(XidEvent(device=object(), xid=79, gpu_instance_id=0xFFFFFFFF,
                                compute_instance_id=0xFFFFFFFF))
        watcher._count(XidEvent(device=object(), xid=13, gpu_instance_id=4, compute_instance_id=0))
    assert [(r.xid, r.gpu, r.gpu_instance) for r in caplog.records] == [(79, "GPU-aaaa", "none"),
                                                                          (13, "GPU-aaaa", "4")]
    assert "4294967295" not in caplog.text
