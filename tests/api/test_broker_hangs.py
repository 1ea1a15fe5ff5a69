"""A creation's wake-up is a hint: a broker that hangs costs the hint, never the reset request."""

from notify.models import Event
from tests.api.payloads import body, statuses_from_a_thread


def test_a_creation_answers_while_the_broker_accepts_connections_and_never_answers(
    transactional_db, api, policy, silent_server, monkeypatch
):
    # Published after commit, inside the request: before its publish had a timeout, this request
    # waited on the broker for ever. A thread of its own, so that its producer is a new one.
    monkeypatch.setenv("CELERY_BROKER_WRITE_URL", silent_server.url)

    assert statuses_from_a_thread(api, body()) == [201]
    assert len(silent_server.accepted) == 1  # the wake-up was tried, and lost
    (event,) = Event.objects.all()
    assert event.next_action_at is not None  # due in the database: the sweeper enqueues it ...
    assert event.wake_at is None  # ... at its next run: the wake-up that did not go is forgotten
