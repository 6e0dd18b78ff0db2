"""The first half of the scenario walk (test_alerting_e2e.py: WALKS[0], walk_scenarios): every
scenario of it trips its alert, score, detractor and inspection verdict, and paging always means a
non-healthy status. A file of its own so that xdist's loadfile runs the two halves side by side."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_alerting_e2e import walk_scenarios

pytestmark = pytest.mark.walk  # make e2e's walk lane


def test_the_first_half_trips_every_alert_score_detractor_and_verdict(tmp_path: Path) -> None:
    walk_scenarios(tmp_path, 0)
