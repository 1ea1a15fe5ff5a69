"""A worker step costs at most four SQL statements on PostgreSQL on its usual paths: the turn
that takes, leases and reads the event is one, and the write that leaves nothing due gives
the lease back and records the next wake-up. A step that does three actions at once (an SMS
refused, then the email) costs two more. A provider's status callback costs two: one read,
one write."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from notify import worker
from notify.models import Claim, Event
from notify.rules.vocabulary import Channel, NextAction, State
from tests.notify.helpers import post_status
from tests.notify.workers import scripted_event

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

# Accepted, then delivered at the first poll.
DELIVERED = (("sent", 0), ("delivered", 0))
# Accepted, then failed at the first poll: the poll's step claims and sends the email.
FAILED = (("sent", 0), ("failed", 0))


def counted_step(transports, clock):
    """One turn of the most urgent due event; its report and the statements it sent."""
    with CaptureQueriesContext(connection) as statements:
        report = worker.step_most_urgent("evt_hint", transports=transports, clock=clock, owner="worker-1")
    return report, [query["sql"] for query in statements.captured_queries]


def test_an_sms_submit_is_three_statements_and_a_poll_two(policy, clock, simulator, transports):
    scripted_event(simulator, clock, statuses=DELIVERED)

    submit, submit_sql = counted_step(transports, clock)
    clock.advance(policy.poll_interval.total_seconds())
    poll, poll_sql = counted_step(transports, clock)

    assert (submit.actions, len(submit_sql)) == ((NextAction.SUBMIT_SMS,), 3)  # turn, intent, outcome + release
    assert (poll.actions, len(poll_sql)) == ((NextAction.POLL_SMS,), 2)  # turn, receipt + release
    assert submit.wake_up is not None  # the release recorded and sent the first poll's wake-up


def test_a_rejected_sms_and_its_fallback_email_in_one_step_is_six_statements(policy, clock, simulator, transports):
    scripted_event(simulator, clock, create=["reject"], smtp=("accept",))

    report, sql = counted_step(transports, clock)

    # Submit (intent, refusal) and claim, send (claim, intent, acceptance + release), after the turn.
    assert report.actions == (NextAction.SUBMIT_SMS, NextAction.CLAIM_EMAIL, NextAction.SUBMIT_EMAIL)
    assert len(sql) == 6


def test_the_email_fallback_at_the_deadline_is_four_statements(policy, clock, simulator, transports):
    scripted_event(simulator, clock, statuses=(("sent", 0),), smtp=("accept",))
    counted_step(transports, clock)  # the submit; no receipt ever comes
    clock.advance(policy.sms_budget.total_seconds())

    report, sql = counted_step(transports, clock)

    assert report.actions == (NextAction.CLAIM_EMAIL, NextAction.SUBMIT_EMAIL)
    assert len(sql) == 4  # turn, claim, intent, acceptance + release


def counted_callback(client, event_id, status, sid):
    """A signed status callback for the event's SMS; its answer and the statements it sent."""
    with CaptureQueriesContext(connection) as statements:
        answer = post_status(client, event_id, status, sid=sid)
    return answer, [query["sql"] for query in statements.captured_queries]


def test_a_status_callback_reads_its_event_once_and_writes_once(policy, clock, simulator, transports, client):
    event = scripted_event(simulator, clock, statuses=(("sent", 0),))
    counted_step(transports, clock)  # the submit: Twilio has the message
    sid = Claim.objects.get(event=event, channel=Channel.SMS).provider_ref

    sent, sent_sql = counted_callback(client, event.pk, "sent", sid)
    delivered, delivered_sql = counted_callback(client, event.pk, "delivered", sid)

    assert (sent.status_code, len(sent_sql)) == (204, 2)  # read, observation + claim
    # A delivery first asks whether it proves the acceptance; the same read serves its write.
    assert (delivered.status_code, len(delivered_sql)) == (204, 2)  # read, observation + transition + claim
    assert Event.objects.get(pk=event.pk).state == State.SMS_DELIVERED
