"""atheris harness: the YAML config loader (schema validation of every source included).

    python fuzz/fuzz_config.py -max_total_time=600 [CORPUS_DIR ...]

Seed with the shipped configs (copy them, libFuzzer writes new inputs into the corpus directory):
    mkdir -p /tmp/corpus-config && cp deploy/config/*.yaml /tmp/corpus-config/

Contract: a validated dict with `listen`, or `ConfigError` naming the file.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["infrapulse"]):
    from infrapulse import config


def test_one_input(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    try:
        cfg = config.load_text(text, "fuzz.yaml")
    except config.ConfigError as exc:
        assert str(exc).startswith("fuzz.yaml"), exc
        return
    assert isinstance(cfg, dict) and "listen" in cfg


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
