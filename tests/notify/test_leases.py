"""Leases: one owner at a time, take-over only after expiry, fencing of stale holders."""

from notify.models import Claim, Event, Observation
from notify.rules.vocabulary import Channel, ClaimState, Effect, Normalized, State
from notify.writes import intent, leases, moves, reads
from tests.factories import new_event
from tests.notify.helpers import claim, observe, seconds

TTL = seconds(30)


def take(event, owner, now) -> leases.Lease:
    lease = leases.take(event.id, owner, at=now, ttl=TTL)
    assert lease is not None, f"{owner} could not take the lease"
    return lease


def test_a_held_lease_cannot_be_taken(db, policy, clock):
    event = new_event(clock.now())

    take(event, "worker-a", clock.now())
    second = leases.take(event.id, "worker-b", at=clock.now() + seconds(29), ttl=TTL)

    assert second is None
    assert Event.objects.get(pk=event.id).lease_owner == "worker-a"


def test_an_expired_lease_is_taken_over_with_a_new_fencing_token(db, policy, clock):
    event = new_event(clock.now())

    first = take(event, "worker-a", clock.now())
    second = take(event, "worker-b", clock.now() + seconds(30))

    assert second.token > first.token


def test_a_holder_whose_lease_was_taken_over_cannot_commit(db, policy, clock):
    event = new_event(clock.now())
    stale = take(event, "worker-a", clock.now())
    take(event, "worker-b", clock.now() + seconds(31))

    outcome = observe(event.id, Channel.SMS, Normalized.TERMINAL_FAILURE, clock.now() + seconds(32), lease=stale)
    claimed = claim(event.id, clock.now() + seconds(90), lease=stale)

    assert (outcome.effect, claimed.effect) == (Effect.CONFLICT, Effect.CONFLICT)
    after = Event.objects.get(pk=event.id)
    assert (after.state, after.version) == (State.SMS_REQUESTED, 1)
    assert not Claim.objects.filter(event=event, channel=Channel.EMAIL).exists()
    # What the stale worker saw is still evidence.
    assert Observation.objects.get(event=event).effect == Effect.CONFLICT


def test_a_stale_holder_cannot_record_a_submit_intent(db, policy, clock):
    event = new_event(clock.now())
    stale = take(event, "worker-a", clock.now())
    take(event, "worker-b", clock.now() + seconds(31))

    assert not intent.begin_submit(
        event.id, Channel.SMS, now=clock.now() + seconds(32), at=clock.now() + seconds(32), lease=stale
    )
    assert Claim.objects.get(event=event, channel=Channel.SMS).state == ClaimState.CLAIMED


def test_a_submit_intent_is_recorded_once(db, policy, clock):
    event = new_event(clock.now())
    lease = take(event, "worker-a", clock.now())

    first = intent.begin_submit(event.id, Channel.SMS, now=clock.now(), at=clock.now(), lease=lease)
    again = intent.begin_submit(
        event.id, Channel.SMS, now=clock.now() + seconds(1), at=clock.now() + seconds(1), lease=lease
    )

    sms = Claim.objects.get(event=event, channel=Channel.SMS)
    assert (first is not None, again) == (True, None)
    assert (sms.state, sms.attempts, sms.submitted_at) == (ClaimState.SUBMITTING, 1, clock.now())


def test_a_holder_can_renew_until_its_lease_expires(db, policy, clock):
    event = new_event(clock.now())
    lease = take(event, "worker-a", clock.now())

    assert leases.renew(event.id, lease, at=clock.now() + seconds(20), ttl=TTL)
    assert leases.take(event.id, "worker-b", at=clock.now() + seconds(40), ttl=TTL) is None
    assert not leases.renew(event.id, lease, at=clock.now() + seconds(50), ttl=TTL)


def test_release_frees_the_event_but_not_for_a_stale_holder(db, policy, clock):
    event = new_event(clock.now())
    stale = take(event, "worker-a", clock.now())
    current = take(event, "worker-b", clock.now() + seconds(31))

    assert not leases.give_back(event.id, stale)
    assert Event.objects.get(pk=event.id).lease_owner == "worker-b"
    assert leases.give_back(event.id, current)
    assert leases.take(event.id, "worker-c", at=clock.now() + seconds(32), ttl=TTL) is not None


def test_no_intent_is_recorded_for_an_event_changed_since_it_was_read(policy, clock):
    event = new_event(clock.now())
    lease = leases.take(event.id, "slow-worker", at=clock.now(), ttl=seconds(30))
    assert lease is not None
    known = reads.load(event.id)
    # Meanwhile the sweeper expires the event (no lease needed for that).
    assert moves.expire(event.id, now=event.expires_at, actor="sweeper").applied

    begun = intent.begin_submit(event.id, Channel.SMS, now=clock.now(), at=clock.now(), lease=lease, known=known)

    assert begun is None
    assert Claim.objects.get(event=event, channel=Channel.SMS).state == ClaimState.CLAIMED
