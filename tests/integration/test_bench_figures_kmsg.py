"""The kmsg flood bench (bench/kmsg_flood.py) in a tiny mode: it floods the source with the real
captures' kernel records and starts util-linux `dmesg` as its peer; each pass stays bounded by
the source's per-cycle limit. The integration half of tests/test_bench_figures.py."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))


def test_the_kmsg_flood_bench_runs_in_a_tiny_mode_and_is_bounded_per_pass():
    import kmsg_flood

    r = kmsg_flood.run(records=25_000, quiet_passes=5)
    # 25k records at 10k per pass: 10k, 10k, 5k (then an empty pass that ends the loop)
    assert (r["passes"], r["max_per_pass"], r["records"]) == (3, 10_000, 25_000)
    assert r["messages"] > 200  # every real capture's kernel records, read in place
    assert r["cpu_per_10k"] > 0 and r["floor_per_10k"] > 0 and r["quiet"]["cpu_per_pass"] > 0
    assert r["dmesg_per_10k"] is None or r["dmesg_per_10k"] > 0
