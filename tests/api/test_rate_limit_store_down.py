"""The API's rate limits live in Redis: when that Redis is down or hangs, a service's request goes
through uncounted (logged), as an unreachable broker costs a wake-up hint, not the request.
A reset refused, or held for as long as a dead connection takes to time out, would cost the
subscriber the reset; a count missed for a while costs nothing that the limits protect."""

import logging
from datetime import timedelta

import time_machine
from django.test import override_settings

from notify.api.throttle import STORE_RETRY_SECONDS
from plumbing.clock import system_clock
from tests.api.payloads import body, post, statuses_from_a_thread


def counted_in(url: str) -> override_settings:
    """Both rate limits counted in the Redis at ``url``, for the length of a with block (the
    fixtures that clear the counts at teardown then see the usual store again)."""
    return override_settings(RATE_LIMIT_STORAGE=url)


def test_a_creation_goes_through_when_the_rate_limit_store_is_unreachable(api, policy, caplog):
    with counted_in("redis://127.0.0.1:9/0"), caplog.at_level(logging.WARNING, logger="notify.api"):  # nothing on 9
        answer = post(api, body())

    assert answer.status_code == 201
    warnings = [record for record in caplog.records if record.getMessage() == "rate_limit_unavailable"]
    assert {record.limit for record in warnings} == {"auth_failures", "service"}


def test_a_creation_goes_through_when_the_rate_limit_store_hangs(transactional_db, api, policy, silent_server):
    with counted_in(silent_server.url):
        # Without a timeout on the store's socket, the request would wait for ever.
        assert statuses_from_a_thread(api, body()) == [201]


def test_while_the_store_hangs_a_process_asks_it_once_then_goes_on_without_waiting(api, policy, silent_server):
    # Each ask waits out REDIS_CACHE_TIMEOUT: asked by every request, twice, a stuck Redis held
    # each request half a second, and the web's threads served a few dozen a second. After one
    # failure the process stops asking (no new connection reaches the server) until
    # STORE_RETRY_SECONDS have passed; then one request asks again.
    with counted_in(silent_server.url), time_machine.travel(system_clock.now()) as traveller:
        answers = [post(api, body()).status_code for _ in range(10)]
        asked_while_open = len(silent_server.accepted)
        traveller.shift(timedelta(seconds=STORE_RETRY_SECONDS + 1))
        answers.append(post(api, body()).status_code)

    assert answers == [201] * 11
    assert asked_while_open == 1
    assert len(silent_server.accepted) == 2
