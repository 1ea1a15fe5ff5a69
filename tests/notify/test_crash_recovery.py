"""Kill-at-every-boundary: a worker stopped anywhere leaves an intent the next worker finishes.

A crash is either an exception (contained: the step unwinds, counts the failure on the
event and gives its lease back) or a kill (the dead worker's lease stays until it expires).
Either way the simulator must count exactly one SMS per event, and one email, except where
a recorded unknown outcome explains a second copy under the same Message-ID.
"""

import pytest

from notify.models import Observation
from notify.rules.vocabulary import Channel, NextAction, Normalized, State
from notify.transports import Transports
from notify.writes import leases
from tests.notify.workers import email_count, run_until_settled, scripted_event, sms_count, step

pytestmark = pytest.mark.django_db(transaction=True)

# Accepted, then reported failed at the first poll: every event walks SMS and email.
FAILS = (("sent", 0), ("failed", 0))


class Crash(Exception):
    """The worker stops here."""


class CrashAround:
    """Wrap one transport method so that the worker stops just before or just after the real call."""

    def __init__(self, inner, method, when):
        self._inner, self._method, self._when = inner, method, when

    def __getattr__(self, name):
        call = getattr(self._inner, name)
        if name != self._method:
            return call

        def crashing(*args, **kwargs):
            if self._when == "before":
                raise Crash(f"before {name}")
            call(*args, **kwargs)
            raise Crash(f"after {name}")

        return crashing


def crashing(transports, channel, when):
    if channel == "sms":
        return Transports(CrashAround(transports.sms, "submit", when), transports.email)
    return Transports(transports.sms, CrashAround(transports.email, "send", when))


def reach_email_stage(event, transports, clock, policy):
    """Submit the SMS, then move to its first poll (which reports the failure)."""
    step(event.id, transports, clock)
    clock.advance(policy.poll_interval.total_seconds())


def crash(boundary, event, transports, clock, policy):
    """Stop a worker at ``boundary``; return its step's report."""
    if boundary in ("before_sms_submit", "after_sms_submit"):
        return step(event.id, crashing(transports, "sms", boundary.split("_")[0]), clock)
    if boundary == "after_sms_recorded":
        return step(event.id, transports, clock, max_actions=1)
    if boundary in ("before_email_claim", "after_email_claim"):
        reach_email_stage(event, transports, clock, policy)
        return step(event.id, transports, clock, max_actions=1 if boundary.startswith("before") else 2)
    reach_email_stage(event, transports, clock, policy)
    return step(event.id, crashing(transports, "email", boundary.split("_")[0]), clock)


INSIDE_A_CALL = ["before_sms_submit", "after_sms_submit", "before_email_submit", "after_email_submit"]
BETWEEN_WRITES = ["after_sms_recorded", "before_email_claim", "after_email_claim"]
CASES = [(b, "exception") for b in INSIDE_A_CALL] + [(b, "kill") for b in INSIDE_A_CALL + BETWEEN_WRITES]


@pytest.mark.parametrize(("boundary", "mode"), CASES)
def test_the_next_worker_recovers_the_intent_without_a_duplicate(policy, clock, simulator, transports, boundary, mode):
    event = scripted_event(simulator, clock, statuses=FAILS)

    report = crash(boundary, event, transports, clock, policy)
    assert report.result == ("failed" if boundary in INSIDE_A_CALL else "done")
    if mode == "kill":
        # A killed process never releases its lease: it stays held until it expires.
        assert leases.take(event.id, "killed-worker", at=clock.now(), ttl=policy.lease_ttl)
    settled = run_until_settled(event.id, transports, clock)

    assert settled.state == State.EMAIL_ACCEPTED
    assert sms_count(simulator, event.id) == 1
    doubtful = Observation.objects.filter(
        event=event,
        channel=Channel.EMAIL,
        normalized__in=(Normalized.UNKNOWN_OUTCOME, Normalized.POSSIBLE_DUPLICATE),
    )
    emails = email_count(simulator, event.id)
    # Every physical email beyond the first is explained by a recorded outcome that says so.
    assert 1 <= emails <= 1 + doubtful.count()
    if boundary in ("before_email_submit", "after_email_submit"):
        # SMTP has no lookup: a send whose worker was lost either side of the call cannot be
        # settled by the next worker, which records a possible duplicate and resends under
        # the same Message-ID.
        assert list(doubtful.values_list("normalized", "raw_status")) == [("possible_duplicate", "holder_lost")]
        assert emails == (2 if boundary == "after_email_submit" else 1)
    else:
        assert (emails, doubtful.exists()) == (1, False)


def test_a_killed_workers_event_is_left_alone_until_its_lease_expires(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock)
    assert step(event.id, crashing(transports, "sms", "after"), clock).result == "failed"
    leases.take(event.id, "killed-worker", at=clock.now(), ttl=policy.lease_ttl)

    clock.advance(policy.lease_ttl.total_seconds() - 1)
    while_held = step(event.id, transports, clock)
    clock.advance(1)
    after_expiry = step(event.id, transports, clock)

    assert while_held.result == "busy"
    assert (after_expiry.result, after_expiry.actions[0]) == ("done", NextAction.RECOVER_SMS)
    assert sms_count(simulator, event.id) == 1
