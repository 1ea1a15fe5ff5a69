import random

import pytest

from simulator.callbacks import ScheduledCallback, schedule
from simulator.faults import CallbackFault
from simulator.messages import StatusChange

SENT = StatusChange("sent", 1.0)
DELIVERED = StatusChange("delivered", 3.0)
TIMELINE = (SENT, DELIVERED)


def test_normal_callbacks_follow_the_timeline():
    assert schedule(TIMELINE, CallbackFault.NORMAL, 9.0, random.Random(1)) == [
        ScheduledCallback(SENT, 1.0),
        ScheduledCallback(DELIVERED, 3.0),
    ]


def test_dropped_callbacks_are_never_sent():
    assert schedule(TIMELINE, CallbackFault.DROP, 9.0, random.Random(1)) == []


def test_reordered_callbacks_send_the_newest_status_first_once_it_is_reached():
    assert schedule(TIMELINE, CallbackFault.REORDER, 9.0, random.Random(1)) == [
        ScheduledCallback(DELIVERED, 3.0),
        ScheduledCallback(SENT, 3.0),
    ]


def test_delayed_callbacks_are_sent_late_by_the_delay():
    assert schedule(TIMELINE, CallbackFault.DELAY, 9.0, random.Random(1)) == [
        ScheduledCallback(SENT, 10.0),
        ScheduledCallback(DELIVERED, 12.0),
    ]


@pytest.mark.parametrize("seed", range(10))
def test_duplicated_callbacks_are_each_sent_two_or_three_times(seed):
    callbacks = schedule(TIMELINE, CallbackFault.DUPLICATE, 9.0, random.Random(seed))

    assert [callback.change for callback in callbacks] == list(TIMELINE)
    assert all(callback.copies in {2, 3} for callback in callbacks)
