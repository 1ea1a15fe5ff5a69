"""On PostgreSQL the hot statements (a creation's INSERT, a transition's write, the leases) are
prepared once per connection and later sent as values only, and the query log still shows
each of them with its values."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from notify import worker
from notify.models import Event
from notify.writes.create import create_event
from tests.factories import reset_request
from tests.notify.workers import scripted_event

pytestmark = pytest.mark.postgres


def prepared_statements() -> dict[str, int]:
    """Each statement this connection has prepared, by its first words, and how often it ran."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements")
        return {statement[:40]: runs for statement, runs in cursor.fetchall()}


def test_a_creation_s_insert_is_prepared_once_and_run_again(db, policy, clock):
    for _ in range(3):
        create_event(reset_request(), now=clock.now())

    [runs] = [runs for statement, runs in prepared_statements().items() if statement.startswith("WITH parent AS")]
    assert runs == 3


def test_a_worker_step_s_statements_are_prepared(transactional_db, policy, clock, simulator, transports):
    scripted_event(simulator, clock)

    worker.step_most_urgent("evt_hint", transports=transports, clock=clock, owner="worker-1")

    statements = prepared_statements()
    assert any(statement.startswith("WITH taken AS (UPDATE notify_event") for statement in statements)
    assert any(statement.startswith("WITH held AS (SELECT id FROM notify_eve") for statement in statements)


def test_the_query_log_shows_a_prepared_statement_with_its_values(db, policy, clock):
    request = reset_request()
    create_event(reset_request(), now=clock.now())

    with CaptureQueriesContext(connection) as statements:
        created = create_event(request, now=clock.now())

    [insert] = [query["sql"] for query in statements.captured_queries]
    assert insert.startswith("WITH parent AS (INSERT INTO notify_event")
    assert f"'{created.event.id}'" in insert
    assert f"'{request.client_key}'" in insert


def test_the_orm_s_statements_on_the_same_connection_are_not_prepared(db, policy, clock):
    created = create_event(reset_request(), now=clock.now())

    for _ in range(3):
        assert Event.objects.filter(pk=created.event.id).exists()

    # The ORM quotes its table names (SELECT 1 AS "a" FROM "notify_event" ...); notify.writes does not.
    assert not [statement for statement in prepared_statements() if '"notify_event"' in statement]
