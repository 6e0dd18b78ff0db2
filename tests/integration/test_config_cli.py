"""The CLI on malformed and valid configs, as `python -m infrapulse` runs it: every malformed case
exits 2 with one line naming the file and the key from a real process (the entry point alone:
tests/test_config.py);
check-config prints ok with the durations as written, reports every error at once, warns on a
deprecated key and fails on files that do not exist. The integration half of tests/test_config.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from infrapulse import config as config_mod
from test_config import BAD


def test_a_malformed_config_exits_2_from_a_real_process(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD[0][0])
    for argv in (["check-config", str(path)], ["run", "--config", str(path)]):
        proc = subprocess.run([sys.executable, "-m", "infrapulse", *argv], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 2, proc.stderr
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, proc.stderr  # one message, no traceback
        assert str(path) in lines[0] and BAD[0][1] in lines[0]


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


# -- issue 18: check-config reports everything, as written, and only what is true here -------------

def test_every_error_is_reported_at_once(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("interval: 5x\nlisten: nope\nbogus: 1\nhealth:\n  window: soon\n"
                    "sources:\n  serving:\n    endpoints:\n      - {name: a, url: ftp://x}\n      - {url: http://y}\n")
    with pytest.raises(config_mod.ConfigError) as err:
        config_mod.load_file(path)
    keys = [k for k, _ in err.value.errors]
    assert keys == ["bogus", "listen", "interval", "health.window", "sources.serving.endpoints[0].url",
                    "sources.serving.endpoints[1].name"]
    assert str(err.value).splitlines()[0] == f"{path}: bogus: unknown key (known keys here: " \
        "health, hostname, http, inspect, interval, listen, role, sources, state_dir)"
    proc = subprocess.run([sys.executable, "-m", "infrapulse", "check-config", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert [line.split(": ")[2] for line in proc.stderr.splitlines()] == keys


def test_serving_history_loads_with_a_deprecation_warning(tmp_path):
    warnings: list[str] = []
    path = tmp_path / "old.yaml"
    path.write_text("sources:\n  serving:\n    history: 30m\n")
    cfg = config_mod.load_file(path, warnings)
    assert cfg.sources["serving"].history == 1800.0
    assert warnings == [f"{path}: sources.serving.history: deprecated and ignored: the health service keeps "
                        "the TTFT/ITL readings its health.window needs; remove the key"]
    proc = subprocess.run([sys.executable, "-m", "infrapulse", "check-config", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == f"warning: {warnings[0]}\n"


def test_check_config_prints_durations_as_written_and_range_errors_too(tmp_path):
    path = tmp_path / "long.yaml"
    path.write_text("interval: 100000h\nhealth: {history: 100000h}\n")
    proc = subprocess.run([sys.executable, "-m", "infrapulse", "check-config", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == f"config error: {path}: health.history: must be at most 1d, got 100000h\n"
    path.write_text("interval: 100000h\n")
    proc = subprocess.run([sys.executable, "-m", "infrapulse", "check-config", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "interval 100000h," in proc.stdout and "e+" not in proc.stdout


def test_check_config_fails_on_files_that_do_not_exist_as_doctor_does(tmp_path):
    """Issue 32: check-config said ok with a missing ca_file and password_file; doctor's FAIL rows
    said otherwise. Both read the same file checks now."""
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    path = tmp_path / "files.yaml"
    path.write_text(
        "sources:\n  serving:\n    endpoints:\n"
        f"      - {{name: v, url: 'https://127.0.0.1:8000/metrics', ca_file: {tmp_path / 'none.pem'}}}\n"
        "  gnmi:\n    targets:\n"
        f"      - {{name: leaf1, address: '10.0.0.1:9339', profile: sonic, username: admin,\n"
        f"         password_file: {tmp_path / 'missing'}}}\n"
        f"      - {{name: leaf2, address: '10.0.0.2:9339', profile: sonic, username: admin,\n"
        f"         password_file: {pw}}}\n")
    proc = subprocess.run([sys.executable, "-m", "infrapulse", "check-config", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout
    assert proc.stdout == ""
    missing, none = tmp_path / "missing", tmp_path / "none.pem"
    assert sorted(proc.stderr.splitlines()) == [
        f"config error: {path}: sources.gnmi.targets[0].password_file: {missing}: does not exist",
        f"config error: {path}: sources.serving.endpoints[0].ca_file: {none}: does not exist"]
