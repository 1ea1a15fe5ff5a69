"""An event keeps the policy version it was created under, whatever is published later."""

from datetime import timedelta

from notify.models import Event
from notify.rules.vocabulary import NextAction, State
from policies.models import Stage
from tests.factories import PolicyVersionFactory, new_event
from tests.notify.helpers import claim, drive_to, seconds


def test_a_mid_flight_policy_change_does_not_alter_an_event_in_flight(db, policy, clock):
    event = drive_to(new_event(clock.now()), State.SMS_PENDING, clock.now())
    # A new version with a five-minute SMS budget replaces the 60 s one while the SMS is pending.
    policy.__class__.objects.filter(pk=policy.pk).update(status=Stage.RETIRED)
    newer = PolicyVersionFactory.create(number=policy.number + 1, sms_budget=timedelta(minutes=5))

    at_old_deadline = clock.now() + seconds(60)
    claimed = claim(event.id, at_old_deadline)
    fresh = new_event(clock.now())

    assert claimed.applied
    assert Event.objects.get(pk=event.id).policy_id == policy.pk
    assert fresh.policy_id == newer.pk
    assert claim(fresh.id, at_old_deadline).applied is False
    assert Event.objects.get(pk=fresh.id).next_action == NextAction.SUBMIT_SMS
