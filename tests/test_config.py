"""Config loading: every malformed case stops with a ConfigError naming the file, key and reason.
The CLI's entry point returns exit code 2 for each; the same from a real process, and
check-config's output, are in tests/integration/test_config_cli.py."""

from __future__ import annotations

import contextlib
import io

import pytest

from infrapulse import cli
from infrapulse import config as config_mod
from infrapulse.health.config import ThresholdPair
from infrapulse.schema import parse_duration


@pytest.mark.parametrize("text,seconds", [("5s", 5.0), ("250ms", 0.25), ("1m30s", 90.0), ("2h", 7200.0),
                                          ("1.5s", 1.5), ("1d", 86400.0)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["5x", "", "s", "5", "5 s", "-5s", "5s5", "ms5"])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_defaults():
    cfg = config_mod.default_config()
    assert cfg.listen == "0.0.0.0:9477"
    assert cfg.interval == 5.0
    assert cfg.role == "auto"


def test_valid_file(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("listen: 127.0.0.1:9999\ninterval: 250ms\n")
    cfg = config_mod.load_file(path)
    assert cfg.listen == "127.0.0.1:9999"
    assert cfg.interval == 0.25


BAD = [
    ("interval: 5x\n", "interval", "expected a duration"),
    ("interval: 5\n", "interval", "expected a duration"),
    ("listen: 9477\n", "listen", "host:port"),
    ("listen: 'localhost:99999'\n", "listen", "port 0-65535"),
    ("bogus: 1\n", "bogus", "unknown key"),
    ("sources: {nosuch: {}}\n", "sources.nosuch", "unknown key"),
    ("sources: []\n", "sources", "expected a mapping"),
    ("role: leader\n", "role", "must be one of"),
    ("interval: [1]\n", "interval", "expected a duration"),
    ("- just\n- a list\n", "<top level>", "expected a mapping"),
    ("listen: [unclosed\n", "", "invalid YAML"),
]


@pytest.mark.parametrize("text,key,reason", BAD)
def test_malformed_config_names_key(tmp_path, text, key, reason):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(config_mod.ConfigError) as err:
        config_mod.load_file(path)
    message = str(err.value)
    assert message.startswith(str(path))
    assert key in message
    assert reason in message


def test_unreadable_files(tmp_path):
    with pytest.raises(config_mod.ConfigError, match="file not found"):
        config_mod.load_file(tmp_path / "missing.yaml")
    with pytest.raises(config_mod.ConfigError, match="is a directory"):
        config_mod.load_file(tmp_path)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(config_mod.ConfigError, match="not UTF-8"):
        config_mod.load_file(binary)


@pytest.mark.parametrize("text,key", [(t, k) for t, k, _ in BAD])
def test_cli_exit_code_2(tmp_path, capsys, text, key):
    """Every malformed config: exit code 2 and one line naming the file and the key, from the
    CLI's entry point (what `python -m infrapulse` passes to sys.exit; from a real process:
    tests/integration/test_config_cli.py)."""
    from infrapulse.cli import main

    path = tmp_path / "bad.yaml"
    path.write_text(text)
    for argv in (["check-config", str(path)], ["run", "--config", str(path)]):
        assert main(argv) == 2
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(lines) == 1, lines  # one message (a traceback would have failed the call)
        assert str(path) in lines[0] and key in lines[0]


# -- issue 18: check-config reports everything, as written, and only what is true here -------------

def test_duplicate_keys_are_errors_with_both_lines(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("interval: 5s\nsources:\n  gnmi:\n    targets: []\n    targets: []\ninterval: 1s\n")
    with pytest.raises(config_mod.ConfigError) as err:
        config_mod.load_file(path)
    assert err.value.errors == [  # in the order they are written
        ("sources.gnmi.targets", "duplicate key (line 5; first at line 4): YAML keeps only the last one"),
        ("interval", "duplicate key (line 6; first at line 1): YAML keeps only the last one"),
    ]


def test_merge_keys_may_be_overridden_without_a_duplicate_error():
    cfg = config_mod.load_text("sources:\n  infiniband: &ib {sysfs_root: /a}\n  ethtool:\n    <<: *ib\n"
                               "    sysfs_root: /b\n")
    assert cfg.sources["ethtool"].sysfs_root == "/b"
    with pytest.raises(config_mod.ConfigError) as err:
        config_mod.load_text("sources:\n  infiniband: &ib {sysfs_root: /a}\n  ethtool:\n    <<: *ib\n"
                             "    sysfs_root: /b\n    sysfs_root: /c\n")
    assert [k for k, _ in err.value.errors] == ["sources.ethtool.sysfs_root"]


LOWER_IS_BETTER = "lower values are better, so good must be below bad"


@pytest.mark.parametrize("thresholds,message", [
    ("ecn_marked_ratio: {good: 0.05, bad: 0.001}",
     "good (0.05) is worse than bad (0.001): for ecn_marked_ratio"),
    ("pfc_pause_ratio: {good: 0.5}",  # against the default bad of 0.2
     "good (0.5) is worse than bad (0.2): for pfc_pause_ratio"),
    ("ttft_p95: {bad: 1}",  # against the SLO of 1.5 s, the good threshold
     "good (1.5) is worse than bad (1): for ttft_p95"),
])
def test_thresholds_with_good_worse_than_bad_are_errors(thresholds, message):
    with pytest.raises(config_mod.ConfigError) as err:
        config_mod.load_text(f"health:\n  thresholds:\n    {thresholds}\n")
    key = f"health.thresholds.{thresholds.split(':')[0]}"
    assert err.value.errors == [(key, f"{message} {LOWER_IS_BETTER}")]


def test_thresholds_in_the_right_direction_still_load():
    cfg = config_mod.load_text("health:\n  slo: {ttft_p95_seconds: 2}\n  thresholds:\n"
                               "    ecn_marked_ratio: {good: 0.01, bad: 0.2}\n    ttft_p95: {bad: 3}\n")
    assert cfg.health.thresholds["ttft_p95"] == ThresholdPair(good=None, bad=3.0)


@pytest.mark.parametrize("seconds,text", [(3.6e8, "100000h"), (90, "90s"), (5400, "90m"), (86400, "1d"),
                                          (0.25, "250ms"), (1.5, "1.5s"), (0, "0s"), (7200, "2h")])
def test_durations_print_as_people_write_them(seconds, text):
    from infrapulse.schema import format_duration

    assert format_duration(seconds) == text and parse_duration(text) == seconds


def test_check_config_does_not_claim_nvml_runs_without_the_library(tmp_path, monkeypatch):
    from infrapulse.sources.gpu import nvml_api

    def no_library(self) -> None:
        raise nvml_api.InitError("no_nvml", "nvmlInit failed: NVML Shared Library Not Found")

    monkeypatch.setattr(nvml_api.RealNvml, "init", no_library)
    path = tmp_path / "gpu.yaml"
    path.write_text("sources: {nvml: {enabled: auto}}\n")
    args = type("Args", (), {"file": str(path)})()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.cmd_check_config(args) == 0
    runs = out.getvalue().split("sources that would run here: ", 1)[1].split(";", 1)[0].split(", ")
    assert "nvml" not in runs  # (kmsg may run here: /dev/kmsg is readable as root)
    assert ("enabled but not on this host: nvml (NVML does not load here (nvmlInit failed: NVML Shared "
            "Library Not Found); enabled: auto leaves the source off)") in out.getvalue()
