"""An object made once per process is made once, however many threads first ask for it at once."""

import threading
import time

import pytest

from plumbing.once import OncePerProcess
from tests.concurrency import run_interleaved

THREADS = 8


def test_threads_missing_at_once_share_one_object_made_once():
    made: list[str] = []

    @OncePerProcess
    def store(name: str) -> object:
        made.append(name)
        time.sleep(0.01)  # long enough for every other thread to miss while this one makes it
        return object()

    start = threading.Barrier(THREADS)
    got: list[object] = []

    def ask() -> None:
        start.wait()
        got.append(store("memory://"))

    run_interleaved([threading.Thread(target=ask) for _ in range(THREADS)])

    assert made == ["memory://"]
    assert len(got) == THREADS
    assert all(each is got[0] for each in got)


def test_each_argument_has_its_own_object_until_the_cache_is_cleared():
    @OncePerProcess
    def store(name: str) -> object:
        return object()

    first = store("a")

    assert store("a") is first
    assert store("b") is not first
    store.cache_clear()
    assert store("a") is not first


def test_a_maker_that_failed_is_asked_again():
    attempts: list[int] = []

    @OncePerProcess
    def store(name: str) -> object:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("the first try fails")
        return object()

    with pytest.raises(ConnectionError):
        store("a")

    assert store("a") is store("a")
    assert len(attempts) == 2
