"""The transition table, cell by cell, through the real compare-and-set functions."""

import itertools

import pytest

from notify.models import Claim, Event, Transition
from notify.rules.machine import ALLOWED_TRANSITIONS
from notify.rules.vocabulary import Channel, State
from tests.factories import new_event
from tests.notify.helpers import OPERATIONS, drive_to, seconds

# The diagram of DESIGN.md, written out independently of the code's table.
S = State
SPECIFIED = {
    (S.SMS_REQUESTED, S.SMS_PENDING),
    (S.SMS_REQUESTED, S.SMS_FAILED),
    (S.SMS_REQUESTED, S.EMAIL_CLAIMED),
    (S.SMS_PENDING, S.SMS_DELIVERED),
    (S.SMS_PENDING, S.SMS_FAILED),
    (S.SMS_PENDING, S.EMAIL_CLAIMED),
    (S.SMS_FAILED, S.EMAIL_CLAIMED),
    (S.EMAIL_CLAIMED, S.EMAIL_ACCEPTED),
    (S.EMAIL_CLAIMED, S.EMAIL_FAILED),
} | {(state, S.EXPIRED) for state in (S.SMS_REQUESTED, S.SMS_PENDING, S.SMS_FAILED, S.EMAIL_CLAIMED)}

CELLS = list(itertools.product(State, OPERATIONS))


def test_the_table_is_the_specified_state_machine():
    table = {(source, target) for source, targets in ALLOWED_TRANSITIONS.items() for target in targets}
    assert table == SPECIFIED


@pytest.mark.parametrize(("from_state", "to_state"), CELLS, ids=[f"{a}->{b}" for a, b in CELLS])
def test_each_cell_of_the_table_is_applied_or_refused(db, policy, clock, from_state, to_state):
    event = drive_to(new_event(clock.now()), from_state, clock.now() + seconds(1))
    # After the fallback deadline (60s) for claims, at expiry for expiring, otherwise mid-flight.
    when = event.expires_at if to_state == State.EXPIRED else clock.now() + seconds(61)

    outcome = OPERATIONS[to_state](event.id, when)

    after = Event.objects.get(pk=event.id)
    if (from_state, to_state) in SPECIFIED:
        assert outcome.applied
        assert (after.state, after.version) == (to_state, event.version + 1)
        last = Transition.objects.get(event=after, version=after.version)
        assert (last.from_state, last.to_state) == (from_state, to_state)
    else:
        assert not outcome.applied
        assert (after.state, after.version) == (from_state, event.version)
        assert Transition.objects.filter(event=after).count() == event.version


@pytest.mark.parametrize("from_state", [State.SMS_REQUESTED, State.SMS_PENDING, State.SMS_FAILED])
def test_without_a_fallback_no_email_can_be_claimed(db, policy, clock, from_state):
    event = drive_to(new_event(clock.now(), email=""), from_state, clock.now() + seconds(1))

    outcome = OPERATIONS[State.EMAIL_CLAIMED](event.id, clock.now() + seconds(61))

    assert not outcome.applied
    assert not Claim.objects.filter(event=event, channel=Channel.EMAIL).exists()


def test_without_a_fallback_a_failed_sms_never_expires(db, policy, clock):
    event = drive_to(new_event(clock.now(), email=""), State.SMS_FAILED, clock.now() + seconds(1))

    outcome = OPERATIONS[State.EXPIRED](event.id, event.expires_at)

    assert not outcome.applied
    assert Event.objects.get(pk=event.id).state == State.SMS_FAILED
