"""Config loading: every malformed case stops with exit code 2 naming the file, key and reason."""

from __future__ import annotations

import subprocess
import sys

import pytest

from infrapulse import config as config_mod
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
    assert cfg["listen"] == "0.0.0.0:9477"
    assert cfg["interval"] == 5.0
    assert cfg["role"] == "auto"


def test_valid_file(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("listen: 127.0.0.1:9999\ninterval: 250ms\n")
    cfg = config_mod.load_file(path)
    assert cfg["listen"] == "127.0.0.1:9999"
    assert cfg["interval"] == 0.25


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
def test_cli_exit_code_2(tmp_path, text, key):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    for argv in (["check-config", str(path)], ["run", "--config", str(path)]):
        proc = subprocess.run([sys.executable, "-m", "infrapulse", *argv], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 2, proc.stderr
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, proc.stderr  # one message, no traceback
        assert str(path) in lines[0] and key in lines[0]


def test_check_config_ok(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("interval: 10s\n")
    proc = subprocess.run([sys.executable, "-m", "infrapulse", "check-config", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert "ok" in proc.stdout and "interval 10s" in proc.stdout


def test_bad_listen_flag_is_usage_error():
    proc = subprocess.run([sys.executable, "-m", "infrapulse", "run", "--listen", "nope"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--listen" in proc.stderr
