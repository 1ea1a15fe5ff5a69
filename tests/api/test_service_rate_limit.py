"""A service's rate limit holds when its requests arrive at once in several web processes sharing
Redis: each request is counted atomically, none is lost to another's read-modify-write."""

import multiprocessing
import uuid
from urllib.parse import urlsplit

import pytest
from django.conf import settings as project_settings
from django.test import RequestFactory

from config.env import Rate
from notify.api.throttle import PerService
from notify.models import ServiceToken

# The suite's own Redis (the broker's server: make test starts one on a port of its own), in the
# database the tests keep for counts.
REDIS = urlsplit(project_settings.CELERY_BROKER_URL)._replace(path="/13").geturl()
pytestmark = pytest.mark.skipif(not REDIS.startswith("redis://"), reason="counts shared in Redis")
PROCESSES = 4
ATTEMPTS = 400  # per process: 1,600 in all, against a limit of 1,000


@pytest.fixture
def shared_redis(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS}}
    settings.API_RATE_LIMIT_STORAGE = REDIS
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
