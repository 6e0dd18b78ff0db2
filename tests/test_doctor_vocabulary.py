"""One vocabulary for doctor's problems and their fixes (doctor/vocabulary.py): every FAIL / warn
row gets a fix, the quickstarts' troubleshooting tables list exactly the vocabulary's rows with
the same fix words, and check-config and doctor name a source that cannot run here alike."""

from __future__ import annotations

import io
import re
from contextlib import redirect_stdout
from pathlib import Path
from types import SimpleNamespace

import pytest

from infrapulse import cli
from infrapulse.doctor import probes
from infrapulse.doctor.report import FAIL, WARN, Check, table, with_fix
from infrapulse.doctor.vocabulary import ENTRIES, NODE_DOC, NOT_ON_THIS_HOST, SWITCH_DOC, entry_for, fix_for

ROOT = Path(__file__).resolve().parents[1]
HEADS = {NODE_DOC: "| row | fix |", SWITCH_DOC: "| reason in the row | fix |"}


def _table(doc: str) -> list[tuple[str, str]]:
    text = (ROOT / doc).read_text()
    lines = text[text.index(HEADS[doc]):].split("\n\n")[0].splitlines()[2:]
    rows = []
    for line in lines:
        first, fix = (cell.strip() for cell in line.strip().strip("|").split(" | ", 1))
        rows.append((first.strip("`"), fix))
    return rows


@pytest.mark.parametrize("doc", [NODE_DOC, SWITCH_DOC])
def test_each_quickstart_table_is_the_vocabulary(doc):
    assert _table(doc) == [(e.row, e.fix) for e in ENTRIES if e.doc == doc]


def test_every_entry_is_reachable_and_every_kind_unique():
    kinds = [e.kind for e in ENTRIES]
    assert len(kinds) == len(set(kinds))
    assert all(e.fix for e in ENTRIES)
    assert all(bool(e.row) == bool(e.doc) for e in ENTRIES)


# A detail of each kind, as the probes write it: each must find its own entry.
SAMPLES = {
    "config.invalid": ("config", "duplicate key (line 2; first at line 1)"),
    "env.unset": ("env", "environment variable GNMI_PW is not set"),
    "file.missing": ("file", "/etc/x/ca.pem: does not exist"),
    "file.no_certificate": ("file", "/etc/x/ca.pem: no PEM certificate in it"),
    "file.empty": ("file", "/etc/x/password: empty"),
    "nvml.no_nvml": ("nvml", f"{NOT_ON_THIS_HOST}: NVML does not load here (nvmlInit failed)"),
    "nvml.no_gpu": ("nvml", "NVML loads (driver 570) but sees no GPU"),
    "source.not_here": ("kmsg", f"{NOT_ON_THIS_HOST}: /dev/kmsg does not exist"),
    "infiniband.no_device": ("infiniband", "no RDMA device found with this config"),
    "serving.refused": ("serving", "connection_refused: [Errno 111] Connection refused"),
    "gnmi.unauthenticated": ("gnmi", "10.0.0.11:9339: unauthenticated: invalid username or password"),
    "gnmi.tls": ("gnmi", "10.0.0.11:9339: tls: TLS handshake failed"),
    "gnmi.files": ("gnmi", "tls: cannot read tls.ca_file /x: No such file or directory"),
    "gnmi.encoding": ("gnmi",
        "10.0.0.11:9339: encoding: the switch supports PROTO; profile sonic needs one of json_ietf"),
    "gnmi.profile": ("gnmi", "profile arista-eos: 0 of 24 mappings answered a Get; sonic answers 22 of 26"),
    "gnmi.no_profile": ("gnmi",
        "profile openconfig: 0 of 20 mappings answered a Get; no known profile answers either"),
    "gnmi.unreachable": ("gnmi", "10.0.0.11:9339: unavailable: failed to connect"),
    "gnmi.no_capabilities": ("gnmi",
        "10.0.0.11:9339: answers but has no Capabilities; profile x will try proto"),
    "gnmi.no_targets": ("gnmi", "no targets configured"),
}


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_each_kind_of_row_gets_its_fix(kind):
    area, detail = SAMPLES[kind]
    assert entry_for(area, detail).kind == kind
    assert with_fix(Check(area, "t", FAIL, detail)).fix == entry_for(area, detail).fix


def test_every_failure_gets_a_fix_and_the_table_prints_it():
    for area in ("config", "file", "gnmi", "nvml", "kmsg", "dcgm", "serving", "whatever"):
        for result in (FAIL, WARN):
            assert with_fix(Check(area, "t", result, "something odd")).fix
    assert with_fix(Check("gnmi", "t", "ok", "fine")).fix == ""
    row = with_fix(Check("serving", "vllm", FAIL, "connection_refused: no"))
    assert table([row]).splitlines()[-1].endswith(
        "connection_refused: no — fix: the engine is not running, or serves its metrics on another port")
    assert fix_for("gnmi", SAMPLES["gnmi.profile"][1], "sonic") == "set profile: sonic for this target"


async def test_check_config_and_doctor_say_the_same_for_a_source_not_here(tmp_path, monkeypatch):
    kmsg = tmp_path / "no-kmsg"
    path = tmp_path / "node.yaml"
    path.write_text(f"sources:\n  kmsg: {{enabled: true, path: {kmsg}}}\n  infiniband: {{enabled: false}}\n"
                    "  ethtool: {enabled: false}\n  nvml: {enabled: false}\n")
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.cmd_check_config(SimpleNamespace(file=str(path))) == 0
    said = re.search(rf"{NOT_ON_THIS_HOST}: kmsg \((.*)\)\)$", out.getvalue().strip())
    assert said, out.getvalue()
    from infrapulse.config import load_file

    rows = await probes.probe_all(load_file(str(path), []), {}, "host")
    row = next(c for c in rows if c.area == "kmsg")
    assert (row.result, row.detail) == (FAIL, f"{NOT_ON_THIS_HOST}: {said.group(1)}")
    assert with_fix(row).fix == next(e.fix for e in ENTRIES if e.kind == "source.not_here")
