"""atheris harness: sysfs values read by the infiniband source (counters, state, phys_state, rate).

    python fuzz/fuzz_sysfs.py -max_total_time=600 [CORPUS_DIR ...]

A small device tree (every kind of file) is made once in a temporary directory; each input is
split into the contents of those files and served through the reader's injectable `pread`, so
the whole read path runs: parse, scale, saturation, partial errors. Contract: one TargetResult
for the device, every file either a number or named in the errors; `parse_state` and
`parse_rate` return a number or raise ValueError.
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["infrapulse"]):
    from infrapulse.sources.nic import families as fam
    from infrapulse.sources.nic import infiniband as ib
FILES = ["ports/1/state", "ports/1/phys_state", "ports/1/rate", "ports/1/counters/port_rcv_data",
         "ports/1/counters/symbol_error", "ports/1/counters/vendor_thing", "ports/1/hw_counters/np_cnp_sent",
         "ports/1/hw_counters/out_of_sequence", "hw_counters/req_cqe_error"]


def _make_tree() -> tuple[Path, Path]:
    root = Path(tempfile.mkdtemp(prefix="infrapulse-fuzz-sysfs-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    device = root / "class" / "infiniband" / "mlx5_0"
    for rel in FILES + ["ports/1/link_layer"]:
        (device / rel).parent.mkdir(parents=True, exist_ok=True)
        (device / rel).write_text("0\n")
    return root, device


ROOT, DEVICE = _make_tree()
contents: dict[str, bytes] = {}
reader = ib.InfinibandReader(ROOT, pread=lambda fd, size, offset: contents[
    str(Path(reader.fd_paths[fd]).relative_to(DEVICE))][:size], rescan_interval=1e9)


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    for rel in FILES:
        contents[rel] = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, ib.READ_SIZE))
    for parser in (ib.parse_state, ib.parse_rate):
        try:
            parser(contents[FILES[0]])
        except ValueError:
            pass
    (result,) = reader.collect()
    assert result.target == "mlx5_0", result
    if result.snapshot is None:
        assert result.reason == "unreadable", result
        return
    found = sum(len(series) for name, series in result.snapshot.series.items()
                if name not in (fam.DEVICE_INFO.name, fam.PORT_INFO.name, fam.SATURATED.name))
    assert found + len(result.partial_errors) == len(FILES), (found, result.partial_errors)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
