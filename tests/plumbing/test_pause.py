"""After a failure a process skips the call for a few seconds, then tries again (plumbing.pause)."""

from datetime import UTC, datetime, timedelta

import time_machine

from plumbing.pause import Pause

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def test_a_pause_lasts_its_seconds_from_the_failure():
    pause = Pause(5)
    with time_machine.travel(NOW, tick=False) as traveller:
        assert not pause.active()
        pause.start()
        traveller.shift(timedelta(seconds=4.9))
        assert pause.active()
        traveller.shift(timedelta(seconds=0.2))
        assert not pause.active()


def test_a_clock_set_back_does_not_make_a_pause_longer():
    pause = Pause(5)
    with time_machine.travel(NOW, tick=False) as traveller:
        pause.start()
        traveller.shift(timedelta(hours=-1))
        assert not pause.active()
