"""A service's rate limit counted in this process's memory (no REDIS_CACHE_URL: one process, or
the demo) answers every request of the web's threads, however they interleave."""

import threading
import time
import uuid

import pytest
from django.http import HttpRequest
from django.test import RequestFactory
from limits import RateLimitItemPerSecond

from config.env import Rate
from notify.api.throttle import PerService
from notify.models import ServiceToken
from plumbing.ratelimit import InProcessWindow
from tests.concurrency import run_interleaved

THREADS = 8
ROUNDS = 100
LIMIT = THREADS * ROUNDS - 100


@pytest.fixture
def counted_in_memory(settings):
    # A limiter of its own (the query makes another cached one), whatever other tests counted.
    settings.RATE_LIMIT_STORAGE = f"memory://?test={uuid.uuid4().hex}"
    settings.API_RATE_LIMIT = Rate(LIMIT, 60)


def test_threads_asking_at_once_are_each_answered_and_counted_once(counted_in_memory):
    request = RequestFactory().post("/api/v1/events")
    request.auth = ServiceToken(service=f"svc-{uuid.uuid4().hex}")  # type: ignore[attr-defined]
    throttle = PerService()
    start = threading.Barrier(THREADS, timeout=30)  # a thread that died fails the test, not hangs it
    allowed, errors = [0] * THREADS, []

    def ask(thread: int) -> None:
        for _ in range(ROUNDS):
            start.wait()  # all threads ask at once...
            try:
                allowed[thread] += throttle.allow_request(request)
            except Exception as error:  # what a request thread would have answered with a 500
                errors.append(repr(error))
            # ...after 15 ms: limits' memory store, counted here before, had then let its 10 ms
            # expiry timer end, and each round made every thread race to start the next one.
            time.sleep(0.015)

    run_interleaved([threading.Thread(target=ask, args=(thread,)) for thread in range(THREADS)])

    assert errors == []
    assert sum(allowed) == LIMIT


def _asker(service: str) -> tuple[PerService, HttpRequest]:
    request = RequestFactory().post("/api/v1/events")
    request.auth = ServiceToken(service=service)  # type: ignore[attr-defined]
    return PerService(), request


def test_counting_a_request_starts_no_thread(counted_in_memory):
    # A thread started per count would be started again each time the last one ended: under a
    # saturated CPU, starting one took 12 ms at p99 (docs/scaling.md), with the count's lock held.
    throttle, request = _asker(f"svc-{uuid.uuid4().hex}")
    before = set(threading.enumerate())

    started = []
    for _ in range(5):
        throttle.allow_request(request)
        started.append(len(set(threading.enumerate()) - before))  # a thread another test left may end meanwhile
        time.sleep(0.015)

    assert started == [0] * 5


class SteppedClock:
    """A monotonic clock the test moves on."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_count_leaves_the_window_when_its_period_is_over():
    clock = SteppedClock()
    window, item = InProcessWindow(clock), RateLimitItemPerSecond(2, 60)

    first = [window.hit(item, "svc") for _ in range(3)]
    clock.now += 59
    still = window.hit(item, "svc")
    clock.now += 1.5
    again = window.hit(item, "svc")

    assert first == [True, True, False]
    assert still is False
    assert again is True


def test_the_window_tells_when_its_oldest_count_leaves_by_its_own_clock():
    clock = SteppedClock()
    window, item = InProcessWindow(clock), RateLimitItemPerSecond(2, 60)
    window.hit(item, "svc")
    clock.now += 20
    window.hit(item, "svc")
    clock.now += 5

    stats = window.get_window_stats(item, "svc")

    # Told in wall-clock seconds, as limits tells it: the first count leaves 35 s from now.
    assert stats.reset_time - time.time() == pytest.approx(35, abs=1)
    assert stats.remaining == 0


def test_a_refused_request_is_told_when_the_oldest_count_leaves(counted_in_memory, settings):
    settings.API_RATE_LIMIT = Rate(2, 60)
    throttle, request = _asker(f"svc-{uuid.uuid4().hex}")

    first = [throttle.allow_request(request) for _ in range(3)]

    assert first == [True, True, False]
    assert throttle.wait() == pytest.approx(60, abs=1)


def test_a_wall_clock_stepped_forward_ends_no_count_early(counted_in_memory, settings, time_machine):
    # NTP catching up a host whose clock had fallen behind: counted by the wall clock, every
    # request of the last minute would leave the window at once, and the service could send
    # its whole limit again straight away.
    settings.API_RATE_LIMIT = Rate(2, 60)
    throttle, request = _asker(f"svc-{uuid.uuid4().hex}")
    time_machine.move_to("2026-12-07 06:00:00+00:00", tick=False)

    first = [throttle.allow_request(request) for _ in range(3)]
    time_machine.move_to("2026-12-07 06:05:00+00:00", tick=False)
    after_the_step = throttle.allow_request(request)

    assert first == [True, True, False]
    assert after_the_step is False
    assert throttle.wait() == pytest.approx(60, abs=1)  # Retry-After as if no step had happened


def test_asking_about_keys_never_counted_keeps_nothing():
    window, item = InProcessWindow(SteppedClock()), RateLimitItemPerSecond(3, 60)

    for n in range(10_000):  # a guesser sending a new account name each time
        assert window.get_window_stats(item, "login-account", f"name-{n}").remaining == 3

    assert len(window) == 0


def test_keys_whose_counts_left_their_window_are_dropped():
    clock = SteppedClock()
    window, item = InProcessWindow(clock), RateLimitItemPerSecond(3, 60)
    for n in range(5_000):
        window.hit(item, "login-account", f"old-{n}")
    clock.now += 61

    for n in range(5_000):
        window.hit(item, "login-account", f"new-{n}")

    assert len(window) == 5_000
