import pytest
import redis
from django.conf import settings
from django.db import connections

from tests.integration.processes import CeleryWorker, worker_environment


@pytest.fixture
def broker():
    """The real Redis broker, emptied: wake-ups from earlier runs must not leak in.

    It is flushed: give the tests a Redis database of their own (make test uses db 15 of its
    own throwaway Redis, deploy/test-services.sh).
    """
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.fail(f"integration tests need a Redis broker of their own, not {settings.CELERY_BROKER_URL}")
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture
def public_base_url(live_server, settings):
    # Callbacks come back to the live server, whose signature check uses this same base.
    settings.PUBLIC_BASE_URL = live_server.url
    # Its request threads must not keep their connections: the test database is dropped at the end.
    database = connections.settings["default"]
    kept, database["CONN_MAX_AGE"] = database["CONN_MAX_AGE"], 0
    yield live_server.url
    database["CONN_MAX_AGE"] = kept


@pytest.fixture
def start_worker(broker, simulator, public_base_url, tmp_path):
    """Start real ``celery worker`` processes (stopped at teardown); call it to get one more."""
    started: list[CeleryWorker] = []

    def start(*, beat=False, concurrency=2, queues=CeleryWorker.queues, **env):
        log_path = tmp_path / f"worker-{len(started)}.log"
        worker = CeleryWorker(
            worker_environment(simulator=simulator, public_base_url=public_base_url, **env),
            log_path,
            beat=beat,
            concurrency=concurrency,
            queues=queues,
        )
        started.append(worker.start())
        return worker

    yield start
    for worker in started:
        worker.stop()
