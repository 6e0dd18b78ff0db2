"""`infrapulse demo` with a `health:` section of the test's choosing, for end-to-end tests that
need the health windows as short as the rules they compress (a scenario's score must recover in
seconds, not in the 5 minutes of the default event window).

    python tests/e2e/demo_launcher.py --listen 127.0.0.1:PORT --workdir DIR \\
        --health '{"window": "6s", "event_window": "12s"}'

Everything else is `infrapulse demo` (simulate/demo.py run_demo): the same simulators, scenario
API and daemon.
"""

from __future__ import annotations

import argparse
import json
import sys

from infrapulse import logs
from infrapulse.simulate.demo import run_demo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--listen", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--interval", default="1s")
    parser.add_argument("--health", type=json.loads, default=None, help="the health: section, as JSON")
    parser.add_argument("--inspect", type=json.loads, default=None, help="the inspect: section, as JSON")
    args = parser.parse_args(argv)
    args.scenario, args.duration, args.web_config_file = [], 0, None
    logs.setup("text", "info")
    return run_demo(args)


if __name__ == "__main__":
    sys.exit(main())
