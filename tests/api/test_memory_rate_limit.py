"""A service's rate limit counted in this process's memory (no REDIS_CACHE_URL: one process, or
the demo) answers every request of the web's threads, however they interleave."""

import threading
import time
import uuid

import pytest
from django.test import RequestFactory

from config.env import Rate
from notify.api.throttle import PerService
from notify.models import ServiceToken
from tests.concurrency import run_interleaved

THREADS = 8
ROUNDS = 100
LIMIT = THREADS * ROUNDS - 100


@pytest.fixture
def counted_in_memory(settings):
    # A store of its own (the query makes another cached limiter), so no other test's timer runs in it.
    settings.API_RATE_LIMIT_STORAGE = f"memory://?test={uuid.uuid4().hex}"
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
            time.sleep(0.015)  # ...after the store's expiry timer (10 ms) has stopped, so each round starts one

    run_interleaved([threading.Thread(target=ask, args=(thread,)) for thread in range(THREADS)])

    assert errors == []
    assert sum(allowed) == LIMIT
