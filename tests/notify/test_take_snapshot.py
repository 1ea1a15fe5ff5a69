"""A turn's read is the event as it is once taken, not as the taking statement's snapshot had it.

``take_most_urgent`` chooses, locks and reads in one statement. A fallback an operator commits
after that statement began but before it locked the row is seen by the lock (the row is
re-checked once locked) yet not by the statement's reads of the rows around it: the event
would read ``email_claimed`` without its email claim, and its step would fail on it. To open
that window wide enough to hit, many due events whose leases are held sit ahead of the
contested one in ``act_by`` order: the choice walks past each before it reaches it.
"""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, connections

from notify.models import Event
from notify.rules.vocabulary import Cause, Channel, State
from notify.writes import leases, moves
from tests.conftest import T0
from tests.runbook.events import event_in

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

HELD_AHEAD = 20_000
ROUNDS = 10


def hold_many_ahead_of(event: Event, count: int) -> None:
    """Copy ``event`` ``count`` times, due earlier than it and leased for an hour."""
    columns = [field.column for field in Event._meta.concrete_fields if field.column not in ("id", "client_key")]
    copied = ", ".join(columns)
    values = ", ".join(
        {
            "act_by": "act_by - interval '1 second'",
            "lease_owner": "'holder'",
            "lease_expires_at": "%s",
        }.get(column, column)
        for column in columns
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO notify_event (id, client_key, {copied}) "
            f"SELECT 'evt_held_' || n, 'held-' || n, {values} FROM notify_event, generate_series(1, %s) n "
            "WHERE id = %s",
            [T0 + timedelta(hours=1), count, event.id],
        )
        cursor.execute("ANALYZE notify_event")


def take_while_an_operator_claims(event: Event, clock):
    """Take a turn on a thread of its own while this thread claims ``event``'s fallback; return both."""
    connected, go, taken = threading.Event(), threading.Event(), {}

    def take():
        try:
            connection.ensure_connection()  # so the statement starts as soon as it is told to
            connected.set()
            go.wait()
            taken["turn"] = leases.take_most_urgent("worker", at=clock.now())
        finally:
            connections.close_all()

    worker = threading.Thread(target=take)
    worker.start()
    connected.wait()
    go.set()
    time.sleep(0.005)  # the turn's statement is walking past the held events
    claimed = moves.claim_email_fallback(event.id, now=clock.now(), actor="operator", cause=Cause.OPERATOR)
    worker.join()
    return claimed, taken["turn"]


def test_a_fallback_committed_while_the_turn_is_taken_is_read_with_its_claim(policy, clock):
    first = event_in(State.SMS_FAILED, clock, ttl=timedelta(seconds=600))
    hold_many_ahead_of(first, HELD_AHEAD)
    leases.take(first.id, "holder", at=clock.now(), ttl=timedelta(hours=1))
    seen = []
    for _ in range(ROUNDS):
        contested = event_in(State.SMS_FAILED, clock, ttl=timedelta(seconds=600))  # behind the held ones

        claimed, turn = take_while_an_operator_claims(contested, clock)

        assert claimed.applied
        if turn is None:  # the turn met the row locked by the claim's statement, and skipped it
            leases.take(contested.id, "holder", at=clock.now(), ttl=timedelta(hours=1))
            continue
        read, _ = turn
        assert read.event_id == contested.id
        seen.append(read.loaded.event.state)
        if read.loaded.event.state == State.EMAIL_CLAIMED:
            assert Channel.EMAIL in read.loaded.claims  # the claim committed with the state
    assert State.EMAIL_CLAIMED in seen  # the fallback landed while a turn was being taken
