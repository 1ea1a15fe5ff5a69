"""How durations read on the console."""

from datetime import timedelta

import pytest

from runbook.templatetags.console import duration, magnitude


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0, "0s"), (59, "59s"), (65, "1m 05s"), (3600, "1h 00m"), (3725, "1h 02m"), (90061, "1d 01h"), (-12, "-12s")],
)
def test_durations_read_as_a_responder_says_them(seconds, shown):
    assert duration(timedelta(seconds=seconds)) == shown


def test_a_missing_duration_is_a_dash():
    assert duration(None) == "—"


def test_overdue_times_drop_their_sign():
    assert duration(magnitude(timedelta(seconds=-75))) == "1m 15s"
