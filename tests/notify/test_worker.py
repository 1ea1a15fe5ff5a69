"""The worker step against the provider simulator: every way an event can end, one SMS at most.

Runs with real commits (no wrapping test transaction) because the transports refuse
to be called inside a DB transaction, and these tests prove the worker never does.
"""

import pytest

from notify.models import Claim, Event, Observation, Transition
from notify.rules.vocabulary import Cause, Channel, ClaimState, NextAction, Normalized, Source, State
from notify.transports import TransactionOpenError, Transports, call_bound
from notify.writes import leases
from policies.models import ChannelPlan
from tests.factories import PolicyVersionFactory
from tests.notify.helpers import seconds
from tests.notify.workers import email_count, run_until_settled, scripted_event, sms_count, step

pytestmark = pytest.mark.django_db(transaction=True)

FAILS = (("sent", 0), ("failed", 0))
NO_RECEIPT = (("sent", 0),)


def observations(event, *, channel=None):
    found = Observation.objects.filter(event=event).order_by("id")
    if channel:
        found = found.filter(channel=channel)
    return [(o.source, o.normalized, o.raw_status) for o in found]


def test_a_delivered_sms_ends_the_event_with_one_sms_and_no_email(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock)

    settled = run_until_settled(event.id, transports, clock)

    assert settled.state == State.SMS_DELIVERED
    assert (sms_count(simulator, event.id), email_count(simulator, event.id)) == (1, 0)
    assert Claim.objects.get(event=event, channel=Channel.SMS).state == ClaimState.DELIVERED


def test_the_first_poll_comes_one_interval_after_the_acceptance(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock)

    report = step(event.id, transports, clock)

    assert report.actions == (NextAction.SUBMIT_SMS,)
    submitted = Event.objects.get(pk=event.id)
    assert (submitted.state, submitted.next_action) == (State.SMS_PENDING, NextAction.POLL_SMS)
    assert submitted.next_action_at == clock.now() + policy.poll_interval
    assert report.wake_after == policy.poll_interval


def test_a_rejected_sms_falls_back_to_exactly_one_email_in_the_same_step(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock, create=["reject"])

    report = step(event.id, transports, clock)

    assert report.actions == (NextAction.SUBMIT_SMS, NextAction.CLAIM_EMAIL, NextAction.SUBMIT_EMAIL)
    assert Event.objects.get(pk=event.id).state == State.EMAIL_ACCEPTED
    assert (sms_count(simulator, event.id), email_count(simulator, event.id)) == (0, 1)
    claim = Transition.objects.get(event=event, to_state=State.EMAIL_CLAIMED)
    assert claim.cause == Cause.OBSERVATION


def test_an_sms_failure_reported_by_poll_falls_back_to_email(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock, statuses=FAILS)

    settled = run_until_settled(event.id, transports, clock)

    assert settled.state == State.EMAIL_ACCEPTED
    assert (sms_count(simulator, event.id), email_count(simulator, event.id)) == (1, 1)


def test_an_sms_without_receipt_gives_way_to_the_email_at_the_fallback_deadline(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock, statuses=NO_RECEIPT)

    settled = run_until_settled(event.id, transports, clock)

    assert settled.state == State.EMAIL_ACCEPTED
    claim = Transition.objects.get(event=event, to_state=State.EMAIL_CLAIMED)
    assert (claim.cause, claim.at) == (Cause.DEADLINE, event.created_at + policy.sms_budget)
    polls = Observation.objects.filter(event=event, source=Source.POLL).count()
    assert polls == policy.sms_budget // policy.poll_interval - 1  # each interval until D, none at D itself
    assert (sms_count(simulator, event.id), email_count(simulator, event.id)) == (1, 1)


def test_a_throttled_submit_is_retried_later_with_the_same_claim(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock, create=["rate_limited", "accept"])

    step(event.id, transports, clock)
    throttled = Claim.objects.get(event=event, channel=Channel.SMS)
    settled = run_until_settled(event.id, transports, clock)

    retry_at = event.created_at + policy.poll_interval
    assert (throttled.state, throttled.next_attempt_at) == (ClaimState.CLAIMED, retry_at)
    assert settled.state == State.SMS_DELIVERED
    assert Claim.objects.get(event=event, channel=Channel.SMS).attempts == 2
    assert sms_count(simulator, event.id) == 1


@pytest.mark.parametrize("fault", ["accept_then_500", "accept_then_drop"])
def test_an_unknown_submit_outcome_is_settled_by_lookup_never_by_resending(policy, clock, simulator, transports, fault):
    event = scripted_event(simulator, clock, create=[fault, "accept"])

    settled = run_until_settled(event.id, transports, clock)

    assert settled.state == State.SMS_DELIVERED
    assert sms_count(simulator, event.id) == 1
    sms = observations(event, channel=Channel.SMS)
    assert sms[0][:2] == (Source.SUBMIT, Normalized.UNKNOWN_OUTCOME)
    assert sms[1][:2] == (Source.RECOVERY, Normalized.ACCEPTED)
    assert Claim.objects.get(event=event, channel=Channel.SMS).attempts == 1


def test_a_submit_the_lookup_proves_absent_is_resubmitted_once(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock, create=["server_error", "accept"])

    settled = run_until_settled(event.id, transports, clock)

    assert settled.state == State.SMS_DELIVERED
    assert (Source.RECOVERY, Normalized.TRANSIENT_ERROR, "not_found") in observations(event)
    assert Claim.objects.get(event=event, channel=Channel.SMS).attempts == 2
    assert sms_count(simulator, event.id) == 1


def test_an_email_deferred_at_every_attempt_fails_at_the_attempt_limit(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock, create=["reject"], smtp=["temp_fail"])

    settled = run_until_settled(event.id, transports, clock)

    assert settled.state == State.EMAIL_FAILED
    email = Claim.objects.get(event=event, channel=Channel.EMAIL)
    assert (email.state, email.attempts) == (ClaimState.FAILED, policy.email_attempt_limit)
    assert observations(event, channel=Channel.EMAIL)[-1] == (
        Source.SUBMIT,
        Normalized.TERMINAL_FAILURE,
        "attempt_limit_reached",
    )
    assert email_count(simulator, event.id) == 0


def test_an_email_refused_for_good_fails_the_channel(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock, create=["reject"], smtp=["perm_fail"])

    settled = run_until_settled(event.id, transports, clock)

    assert settled.state == State.EMAIL_FAILED
    assert Claim.objects.get(event=event, channel=Channel.EMAIL).attempts == 1


def test_an_unknown_smtp_outcome_is_recorded_then_resent_with_the_same_message_id(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock, create=["reject"], smtp=["drop_after_data", "accept"])

    settled = run_until_settled(event.id, transports, clock)

    assert settled.state == State.EMAIL_ACCEPTED
    # Two physical copies under one Message-ID, and the record says why.
    assert email_count(simulator, event.id) == 2
    assert observations(event, channel=Channel.EMAIL) == [
        (Source.SUBMIT, Normalized.UNKNOWN_OUTCOME, "connection_lost"),
        (Source.SUBMIT, Normalized.ACCEPTED, "smtp_250"),
    ]


def test_a_policy_that_forbids_resending_after_an_unknown_outcome_stops_there(clock, simulator, transports):
    PolicyVersionFactory.create(resubmit_unknown_email=False)
    event = scripted_event(simulator, clock, create=["reject"], smtp=["drop_after_data", "accept"])

    settled = run_until_settled(event.id, transports, clock)

    assert settled.state == State.EMAIL_FAILED
    assert email_count(simulator, event.id) == 1
    assert observations(event, channel=Channel.EMAIL)[-1][2] == "unknown_not_resubmitted"


def test_an_sms_only_event_without_receipt_expires(clock, simulator, transports):
    PolicyVersionFactory.create(channel_plan=ChannelPlan.SMS_ONLY)
    event = scripted_event(simulator, clock, statuses=NO_RECEIPT)

    settled = run_until_settled(event.id, transports, clock)

    assert settled.state == State.EXPIRED
    assert Transition.objects.get(event=event, to_state=State.EXPIRED).at == event.expires_at
    assert sms_count(simulator, event.id) == 1


def test_a_step_with_nothing_due_leaves_the_lease_alone(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock)
    step(event.id, transports, clock)
    token = Event.objects.get(pk=event.id).lease_token

    report = step(event.id, transports, clock)

    assert (report.result, report.actions) == ("not_due", ())
    assert Event.objects.get(pk=event.id).lease_token == token


def test_a_step_finds_the_event_held_by_another_worker_and_does_nothing(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock)
    leases.take(event.id, "other-worker", at=clock.now(), ttl=policy.lease_ttl)

    report = step(event.id, transports, clock)

    assert (report.result, report.wake_after) == ("busy", None)
    assert sms_count(simulator, event.id) == 0


def test_a_wake_up_is_never_scheduled_further_off_than_one_poll_interval(clock, simulator, transports):
    policy = PolicyVersionFactory.create(poll_interval=seconds(10), email_backoff=seconds(30))
    event = scripted_event(simulator, clock, create=["reject"], smtp=["temp_fail", "accept"])

    report = step(event.id, transports, clock)

    assert Claim.objects.get(event=event, channel=Channel.EMAIL).next_attempt_at == clock.now() + seconds(30)
    assert report.wake_after == policy.poll_interval


def test_a_missing_event_is_reported_gone(db, transports, clock):
    report = step("evt_01ARZ3NDEKTSV4RRFFQ69G5FAV", transports, clock)

    assert report.result == "gone"


@pytest.mark.django_db(transaction=False)
def test_a_transport_called_inside_a_transaction_is_refused(policy, clock, transports):
    # The default test transaction wraps this test: exactly the mistake the guard exists for.
    with pytest.raises(TransactionOpenError):
        transports.sms.fetch("SM" + "0" * 32)


def test_a_long_step_renews_its_lease_before_the_next_remote_call(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock, create=["reject"])
    slow = policy.lease_ttl * 2 / 3  # each call takes two thirds of the lease

    class SlowProvider:
        def __init__(self, inner):
            self._inner = inner

        def __getattr__(self, name):
            def call(*args, **kwargs):
                clock.advance(slow.total_seconds())
                return getattr(self._inner, name)(*args, **kwargs)

            return call

    seen = {}

    class Watched(SlowProvider):
        def send(self, message, **kwargs):
            seen["lease_expires_at"] = Event.objects.get(pk=event.id).lease_expires_at
            return super().__getattr__("send")(message, **kwargs)

    slow_transports = Transports(SlowProvider(transports.sms), Watched(transports.email))
    report = step(event.id, slow_transports, clock)

    assert report.actions == (NextAction.SUBMIT_SMS, NextAction.CLAIM_EMAIL, NextAction.SUBMIT_EMAIL)
    # Renewed at the claim (after the slow SMS call), so it outlives the slow email call.
    assert seen["lease_expires_at"] == event.created_at + slow + policy.lease_ttl
    assert Event.objects.get(pk=event.id).state == State.EMAIL_ACCEPTED


class DuringCall:
    """Wrap a transport so that ``during(name)`` runs inside each call, before the real one."""

    def __init__(self, inner, during):
        self._inner, self._during = inner, during

    def __getattr__(self, name):
        def call(*args, **kwargs):
            self._during(name)
            return getattr(self._inner, name)(*args, **kwargs)

        return call


def test_a_call_slower_than_the_lease_ttl_is_not_taken_over(clock, simulator, transports, settings):
    policy = PolicyVersionFactory.create(lease_ttl=seconds(5))
    event = scripted_event(simulator, clock)
    bound = 2 * settings.TWILIO_TIMEOUT
    rival = {}

    def slow(name):
        clock.advance(bound - 1)  # longer than the lease TTL, within what one call may take
        rival["report"] = step(event.id, transports, clock, owner="rival")
        rival["lease_left"] = Event.objects.get(pk=event.id).lease_expires_at - clock.now()

    step(event.id, Transports(DuringCall(transports.sms, slow), transports.email), clock)

    assert bound - 1 > policy.lease_ttl.total_seconds()
    # The lease was extended to cover the call, and the claim is not due for settling before it ends.
    assert rival["lease_left"] > seconds(0)
    assert rival["report"].actions == ()
    assert sms_count(simulator, event.id) == 1


@pytest.mark.parametrize(("call", "create"), [("fetch", "accept"), ("find", "accept_then_drop")])
def test_a_poll_or_lookup_slower_than_the_lease_ttl_is_not_taken_over(call, create, clock, simulator, transports):
    PolicyVersionFactory.create(lease_ttl=seconds(5))
    event = scripted_event(simulator, clock, create=[create, "accept"])
    step(event.id, transports, clock)  # the SMS is submitted: polled (accepted) or looked up (answer lost) next
    clock.advance((Event.objects.get(pk=event.id).next_action_at - clock.now()).total_seconds())
    bound = call_bound(Channel.SMS).total_seconds()
    rival = {}

    def slow(name):
        if name == call:
            clock.advance(bound - 1)  # longer than the lease TTL, within what one call may take
            rival["report"] = step(event.id, transports, clock, owner="rival")

    report = step(event.id, Transports(DuringCall(transports.sms, slow), transports.email), clock)

    assert report.actions[0] == (NextAction.POLL_SMS if call == "fetch" else NextAction.RECOVER_SMS)
    assert rival["report"].result == "busy"  # the lease covered the whole call


def test_a_submit_left_in_flight_is_not_looked_up_before_the_call_could_have_ended(
    policy, clock, simulator, transports, settings
):
    event = scripted_event(simulator, clock)

    class Died(Exception):
        pass

    def die(name):
        raise Died

    died = step(event.id, Transports(DuringCall(transports.sms, die), transports.email), clock)
    assert died.result == "failed"
    settle_at = Claim.objects.get(event=event, channel=Channel.SMS).next_attempt_at
    clock.advance((settle_at - clock.now()).total_seconds() - 1)
    early = step(event.id, transports, clock)
    clock.advance(1)
    settled = step(event.id, transports, clock)

    assert settle_at == event.created_at + seconds(2 * settings.TWILIO_TIMEOUT) + settings.NOTIFY_SMS_LOOKUP_DELAY
    assert (early.result, settled.actions[0]) == ("not_due", NextAction.RECOVER_SMS)
    # Not listed so soon after the submit began proves nothing: nothing is sent again yet.
    assert sms_count(simulator, event.id) == 0


def test_the_lookup_after_a_timeout_waits_from_when_the_call_ended(policy, clock, simulator, transports, settings):
    event = scripted_event(simulator, clock, create=["accept_then_drop", "accept"])

    report = step(
        event.id, Transports(DuringCall(transports.sms, lambda name: clock.advance(10)), transports.email), clock
    )

    assert report.actions == (NextAction.SUBMIT_SMS,)
    sms = Claim.objects.get(event=event, channel=Channel.SMS)
    assert sms.next_attempt_at == clock.now() + settings.NOTIFY_SMS_LOOKUP_DELAY
    assert sms_count(simulator, event.id) == 1
