"""A service's rate limit holds when its requests arrive at once in several web processes sharing
Redis: each request is counted atomically, none is lost to another's read-modify-write; and it
holds whatever the asking host's clock says, the window being timed by Redis's."""

import multiprocessing
import time
import uuid
from datetime import timedelta

import pytest
from django.http import HttpRequest
from django.test import RequestFactory

from config.env import Rate
from notify.api.throttle import PerService
from notify.models import ServiceToken
from tests.counts import COUNTS_REDIS, host_clock, in_redis

pytestmark = in_redis
PROCESSES = 4
ATTEMPTS = 400  # per process: 1,600 in all, against a limit of 1,000


@pytest.fixture
def shared_redis(settings):
    settings.RATE_LIMIT_STORAGE = COUNTS_REDIS
    settings.API_RATE_LIMIT = Rate(1000, 60)


def _allowed(service: str, start: "multiprocessing.synchronize.Barrier", results: "multiprocessing.Queue[int]") -> None:
    request = RequestFactory().post("/api/v1/events")
    request.auth = ServiceToken(service=service)  # type: ignore[attr-defined]
    throttle = PerService()
    start.wait()
    results.put(sum(throttle.allow_request(request) for _ in range(ATTEMPTS)))


def test_a_service_s_limit_holds_across_processes_asking_at_once(shared_redis):
    service = f"svc-{uuid.uuid4().hex}"
    fork = multiprocessing.get_context("fork")
    start, results = fork.Barrier(PROCESSES), fork.Queue()
    processes = [fork.Process(target=_allowed, args=(service, start, results)) for _ in range(PROCESSES)]
    for process in processes:
        process.start()
    allowed = [results.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(timeout=60)

    assert sum(allowed) == 1000


def test_a_throttled_service_is_told_when_its_oldest_counted_request_leaves_the_window(shared_redis):
    request = RequestFactory().post("/api/v1/events")
    request.auth = ServiceToken(service=f"svc-{uuid.uuid4().hex}")  # type: ignore[attr-defined]
    throttle = PerService()

    answers = [throttle.allow_request(request) for _ in range(1001)]

    assert answers == [True] * 1000 + [False]
    assert 58 <= throttle.wait() <= 60


@pytest.fixture
def small_limit(shared_redis, settings):
    settings.API_RATE_LIMIT = Rate(3, 60)


SPENT_AGO = 1.5  # seconds between spending the limit and asking again


def _spent_limit() -> tuple[PerService, HttpRequest]:
    """A throttle, and a request of a new service that spent its limit (three) SPENT_AGO seconds ago.

    The pause tells a Retry-After read from the window (60 s less the pause) from the whole
    period a throttle answers when it cannot read the window, or finds it empty (60 s)."""
    request = RequestFactory().post("/api/v1/events")
    request.auth = ServiceToken(service=f"svc-{uuid.uuid4().hex}")  # type: ignore[attr-defined]
    throttle = PerService()
    assert [throttle.allow_request(request) for _ in range(3)] == [True] * 3
    time.sleep(SPENT_AGO)
    return throttle, request


def _read_from_the_window(wait: float) -> bool:
    # At most 60 - SPENT_AGO (Redis's time has passed at least that); a few seconds less on a busy machine.
    return 60 - SPENT_AGO - 3 <= wait <= 60 - SPENT_AGO + 0.01


def test_a_host_whose_clock_jumped_ahead_still_finds_the_limit_spent(small_limit):
    throttle, request = _spent_limit()

    # NTP steps a drifted web host two minutes forward: stamped by its own clock, the three
    # requests counted a moment ago looked two minutes old, out of the window, and it let the
    # service through its whole limit again.
    with host_clock(timedelta(minutes=2)):
        assert throttle.allow_request(request) is False
        assert _read_from_the_window(throttle.wait())


def test_a_host_whose_clock_is_behind_is_told_redis_s_retry_after(small_limit):
    throttle, request = _spent_limit()

    # Half a minute behind, the host read the oldest counted request as half a minute in its
    # future, and told the service to wait 90 s for a window that ends in 60.
    with host_clock(-timedelta(seconds=30)):
        assert throttle.allow_request(request) is False
        assert _read_from_the_window(throttle.wait())
