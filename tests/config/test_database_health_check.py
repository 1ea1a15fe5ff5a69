"""A kept PostgreSQL connection is checked before use without a round trip (config/database)."""

import time

import pytest
from django.db import connection, connections

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _own_backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def test_an_idle_kept_connection_is_usable(db):
    _own_backend_pid()  # connected and idle

    assert connection.is_usable()


def test_a_connection_the_server_ended_is_not_usable_and_is_replaced_before_the_next_query(db):
    ended = _own_backend_pid()
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [ended])
    finally:
        other.close()

    # The server ends the session as soon as the signal reaches it; the goodbye follows.
    deadline = time.monotonic() + 5
    while connection.is_usable() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not connection.is_usable()
    connection.close_if_unusable_or_obsolete()
    assert _own_backend_pid() != ended
