"""Wake-ups are turns, served most urgent first: ``take_most_urgent`` picks the due, unleased
event nearest its ``act_by``, each once, and never one that is held or not yet due."""

from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notify.models import Event
from notify.writes import leases
from tests.conftest import T0
from tests.factories import new_event
from tests.notify.helpers import seconds

LEASE_TTL = seconds(30)

backlogs = st.lists(
    st.fixed_dictionaries(
        {
            # The reset's lifetime: act_by is expiry minus the remaining steps' cost.
            "ttl": st.integers(min_value=150, max_value=900),
            "created_after": st.integers(min_value=0, max_value=30),
            "held": st.booleans(),
            "due": st.booleans(),
        }
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(backlog=backlogs)
def test_turns_go_to_due_unleased_events_in_order_of_act_by_each_once(db, policy, backlog):
    Event.objects.all().delete()
    now = T0 + seconds(60)
    events = []
    for spec in backlog:
        event = new_event(T0 + seconds(spec["created_after"]), ttl=timedelta(seconds=spec["ttl"]))
        if not spec["due"]:
            Event.objects.filter(pk=event.id).update(next_action_at=now + seconds(1))
        if spec["held"]:
            assert leases.take(event.id, "another-worker", at=now, ttl=LEASE_TTL)
        events.append(Event.objects.get(pk=event.id))

    taken = []
    while (turn := leases.take_most_urgent("this-worker", at=now)) is not None:
        taken.append(turn[0].event_id)

    eligible = [event for event, spec in zip(events, backlog, strict=True) if spec["due"] and not spec["held"]]
    act_by = {event.id: event.act_by or now for event in events}  # every one is open
    assert sorted(taken) == sorted(event.id for event in eligible)  # each once, and only these
    assert [act_by[event_id] for event_id in taken] == sorted(act_by[event_id] for event_id in taken)


def test_a_taken_turn_holds_the_lease_for_the_events_own_policy_ttl(db, policy):
    event = new_event(T0)

    turn = leases.take_most_urgent("this-worker", at=T0)

    assert turn is not None
    read, lease = turn
    event_id = read.event_id

    stored = Event.objects.get(pk=event_id)
    assert (event_id, stored.lease_owner, stored.lease_token) == (event.id, "this-worker", lease.token)
    assert stored.lease_expires_at == T0 + policy.lease_ttl


def test_an_expired_lease_gives_its_event_a_turn_with_a_new_fencing_token(db, policy):
    event = new_event(T0)
    stale = leases.take(event.id, "gone-worker", at=T0, ttl=LEASE_TTL)

    assert leases.take_most_urgent("this-worker", at=T0 + LEASE_TTL - seconds(1)) is None
    turn = leases.take_most_urgent("this-worker", at=T0 + LEASE_TTL)

    assert turn is not None
    read, lease = turn
    event_id = read.event_id

    assert event_id == event.id
    assert stale is not None
    assert lease.token > stale.token
