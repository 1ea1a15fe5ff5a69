"""Failed attempts (logins, tokens) are counted over a moving window, in Redis by Redis's clock:
hosts that disagree on the time count one client's failures together, and no boundary lets a
client through twice its limit."""

import time
import uuid
from datetime import timedelta

import pytest
import time_machine

from config.env import Rate
from plumbing.ratelimit import FailureCount
from tests.conftest import T0
from tests.counts import COUNTS_REDIS, host_clock, in_redis

FAILURES = FailureCount("test-failures", "LOGIN_FAILURES_PER_CLIENT")
SPENT_AGO = 1.5  # seconds between the last failure and the question: a wait read from the window is 60 less this


@pytest.fixture
def three_a_minute(settings):
    settings.LOGIN_FAILURES_PER_CLIENT = Rate(3, 60)


@pytest.fixture
def counted_in_redis(three_a_minute, settings):
    settings.RATE_LIMIT_STORAGE = COUNTS_REDIS


@in_redis
def test_hosts_that_disagree_on_the_time_count_one_address_s_failures_together(counted_in_redis):
    address = f"test-{uuid.uuid4().hex}"
    with host_clock(-timedelta(seconds=30)):
        FAILURES.add(address)
    FAILURES.add(address)
    with host_clock(timedelta(minutes=2)):
        FAILURES.add(address)

        # Each host's own clock would put the first two more than a minute before this host's now.
        assert FAILURES.retry_after(address) is not None


@in_redis
def test_a_host_two_minutes_ahead_finds_failures_counted_elsewhere_and_redis_s_wait(counted_in_redis):
    address = f"test-{uuid.uuid4().hex}"
    for _ in range(3):
        FAILURES.add(address)
    time.sleep(SPENT_AGO)

    with host_clock(timedelta(minutes=2)):
        ahead = FAILURES.retry_after(address)
    with host_clock(-timedelta(seconds=30)):
        behind = FAILURES.retry_after(address)

    # Read from Redis's window: at most ceil(60 - SPENT_AGO) = 59, a few seconds less on a busy
    # machine. By its own clock, the host ahead would find nothing (None), the one behind 89.
    assert ahead in range(55, 60)
    assert behind in range(55, 60)


def test_failures_just_before_a_minute_boundary_still_count_after_it(three_a_minute, counts_on_the_wall_clock):
    address = "10.2.0.1"
    with time_machine.travel(T0 + timedelta(seconds=59), tick=False) as clock:
        for _ in range(3):
            FAILURES.add(address)
        clock.shift(timedelta(seconds=2))  # into the next minute

        assert FAILURES.retry_after(address) == 58
        clock.shift(timedelta(seconds=58))
        assert FAILURES.retry_after(address) is None


def test_an_operator_s_clear_forgets_the_failures(three_a_minute):
    address = "10.3.0.1"
    for _ in range(3):
        FAILURES.add(address)
    assert FAILURES.retry_after(address) is not None

    FAILURES.clear(address)

    assert FAILURES.retry_after(address) is None
