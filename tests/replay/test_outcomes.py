"""Hand-computed cases for each counted outcome.

The factory policy: SMS budget 60 s, fallback reserve 120 s, poll every 10 s, page margin
30 s; remaining steps cost 9 s from the SMS states (2 poll + 1 select + 5 email + 1 record),
7 s after a failed SMS, 6 s once the email is claimed, 3 s for an SMS with no fallback.
"""

from datetime import timedelta

import pytest

from notify.rules.vocabulary import Channel, ClaimState, State
from runbook.replay.simulate import simulate
from runbook.replay.timings import Call, Timing
from tests.factories import PolicyVersionFactory


def timing(lifetime=600.0, accept=0.5, terminal=None, outcome="none", email=1.0, email_outcome="accepted"):
    return Timing("US", lifetime, accept, terminal, outcome, email, email_outcome)


def test_a_prompt_delivery_ends_with_the_sms_alone(db):
    result = simulate(timing(terminal=5, outcome="delivered"), PolicyVersionFactory.build())
    assert result.states == ["sms_requested", "sms_pending", "sms_delivered"]
    assert result.claimed_at is None
    assert not result.extra_message
    assert not result.paged


def test_no_receipt_claims_the_email_at_the_sms_budget_with_the_rest_of_the_lifetime_left(db):
    result = simulate(timing(), PolicyVersionFactory.build())
    assert result.final_state == State.EMAIL_ACCEPTED
    assert (result.claimed_at, result.claim_remaining_s) == (60.0, 540.0)


def test_a_delivery_after_the_fallback_is_an_extra_message(db):
    result = simulate(timing(terminal=90, outcome="delivered"), PolicyVersionFactory.build())
    assert result.claimed_at == 60.0
    assert result.sms_delivered_at == 90.0
    assert result.extra_message


def test_a_delivery_after_a_failed_email_is_no_extra_message(db):
    result = simulate(timing(terminal=90, outcome="delivered", email_outcome="failed"), PolicyVersionFactory.build())
    assert result.final_state == State.EMAIL_FAILED
    assert not result.extra_message


def test_a_terminal_failure_claims_the_email_at_once(db):
    result = simulate(timing(terminal=4, outcome="failed"), PolicyVersionFactory.build())
    assert result.states == ["sms_requested", "sms_pending", "sms_failed", "email_claimed", "email_accepted"]
    assert result.claimed_at == 4.0


def test_a_fallback_claimed_with_less_than_the_email_step_left_is_useless_and_not_sent(db):
    # A reserve smaller than the email step (a policy validation refuses it; the count is what
    # is tested here): D = min(0 + 600, 600 - 3) = 597 s, claimed with 3 s left.
    policy = PolicyVersionFactory.build(sms_budget=timedelta(seconds=600), fallback_reserve=timedelta(seconds=3))
    result = simulate(timing(), policy)
    assert result.claim_remaining_s == 3.0
    assert result.useless_fallback  # 3 s < email submit 5 s + record 1 s
    # 597 s is past expiry (600 s) less the email step: not sent, the channel fails.
    assert result.no_useful_life
    assert result.final_state == State.EMAIL_FAILED
    assert result.claims[Channel.EMAIL] == ClaimState.FAILED
    assert not result.email_accepted


def test_an_email_retry_left_too_little_life_is_not_sent(db, settings):
    settings.EMAIL_SEND_DEADLINE = 20
    policy = PolicyVersionFactory.build(email_attempt_limit=6)
    # D = min(60, 183 - 120) = 60 s. Each answer is cut at the 20 s deadline and resent 10 s
    # later: attempts at 60, 90, 120 and 150 s; at 180 s the link has 3 s left, under the 6 s
    # the email step costs, so the fifth is not made, though the policy allows six.
    result = simulate(timing(lifetime=183, email=30), policy)
    assert result.final_state == State.EMAIL_FAILED
    assert result.no_useful_life
    assert not result.useless_fallback  # claimed with 123 s left


@pytest.fixture
def slow_sms_settings(settings):
    settings.TWILIO_TIMEOUT = 10  # our call's bound: twice that
    settings.NOTIFY_SMS_LOOKUP_DELAY = timedelta(seconds=2)
    settings.TWILIO_PROCESSING_HORIZON = timedelta(seconds=60)  # absence provable 80 s after the submit


def test_an_sms_accepted_after_the_timeout_is_found_by_a_later_lookup_and_sent_once(db, slow_sms_settings):
    # Accepted 15 s after the submit: unknown at 10 s; not listed at 12 s, which proves nothing
    # before 80 s, so looked up again 6 s later (half the time since the submit); found at 18 s.
    # The receipt (timed from the submit) arrives at 30 s.
    result = simulate(timing(accept=15, terminal=30, outcome="delivered"), PolicyVersionFactory.build())
    assert result.states == ["sms_requested", "sms_pending", "sms_delivered"]
    assert result.sms_attempts == 1
    assert result.sms_delivered_at == 30.0


def test_an_sms_not_found_before_the_deadline_yields_to_the_email_and_is_not_sent_again(db, slow_sms_settings):
    # Accepted only at 70 s: looked up at 12, 18, 27, 37, 47 and 57 s, never provably absent
    # (80 s); the next look (67 s) would be past D (60 s), so the email is claimed at D.
    result = simulate(timing(accept=70, terminal=90, outcome="delivered"), PolicyVersionFactory.build())
    assert result.states == ["sms_requested", "email_claimed", "email_accepted"]
    assert (result.claimed_at, result.sms_attempts) == (60.0, 1)
    # Delivered at 90 s after all: it settles the claim left submitting, and is an extra message.
    assert result.claims[Channel.SMS] == ClaimState.DELIVERED
    assert result.extra_message


@pytest.mark.parametrize(
    ("accept", "attempts"),
    [
        # Listed by the look at 77 s, just before absence could be proven.
        (75, 1),
        # Not listed at 80 s, when absence is proven: sent again (the provider broke its
        # horizon: a second message in real life). The first is found at 107 s.
        (100, 2),
    ],
)
def test_absence_is_proven_only_at_the_call_bound_plus_the_horizon_since_the_submit(
    db, slow_sms_settings, accept, attempts
):
    policy = PolicyVersionFactory.build(sms_budget=timedelta(seconds=200))  # D = 200 s
    result = simulate(timing(accept=accept), policy)
    assert result.sms_attempts == attempts
    assert result.states == ["sms_requested", "sms_pending", "email_claimed", "email_accepted"]
    assert result.claimed_at == 200.0


def test_a_delivery_receipt_before_the_submits_answer_counts(db, settings):
    settings.TWILIO_TIMEOUT = 10
    result = simulate(timing(accept=8, terminal=3, outcome="delivered"), PolicyVersionFactory.build())
    assert result.states == ["sms_requested", "sms_pending", "sms_delivered"]
    assert result.sms_delivered_at == 8.0  # not before the provider has the message


def test_an_email_answered_after_a_read_timeout_but_within_the_exchanges_deadline_is_accepted(db, settings):
    settings.EMAIL_TIMEOUT, settings.EMAIL_SEND_DEADLINE = 5, 20
    result = simulate(timing(terminal=4, outcome="failed", email=8), PolicyVersionFactory.build())
    assert result.final_state == State.EMAIL_ACCEPTED
    assert result.email_accepted


def test_an_email_whose_answers_are_lost_is_resent_then_given_up_per_the_policy(db, settings):
    settings.EMAIL_SEND_DEADLINE = 5
    policy = PolicyVersionFactory.build(email_attempt_limit=3)
    result = simulate(timing(terminal=4, outcome="failed", email=30), policy)
    assert result.final_state == State.EMAIL_FAILED
    assert not result.email_accepted


def test_an_sms_only_event_without_a_receipt_expires_without_outcome_and_would_page(db):
    policy = PolicyVersionFactory.build(channel_plan="sms_only")
    result = simulate(timing(), policy)
    assert result.final_state == State.EXPIRED
    assert result.expired_without_outcome
    # act_by = 600 - 3; within the 30 s margin from 567 s, while polling still has a step to take.
    assert result.paged
    assert not result.page_without_action


def test_an_sms_only_event_delivered_late_is_not_expired_but_was_at_risk(db):
    policy = PolicyVersionFactory.build(channel_plan="sms_only")
    result = simulate(timing(terminal=590, outcome="delivered"), policy)
    assert result.final_state == State.SMS_DELIVERED
    assert not result.expired_without_outcome
    assert result.paged


@pytest.mark.parametrize("after_expiry_s", [10, 60, 2700])
def test_a_receipt_after_expiry_does_not_clear_an_expiry_without_outcome(db, after_expiry_s):
    # Judged at expiry, as the live roll-up judges it: the receipt came too late, however soon after.
    policy = PolicyVersionFactory.build(channel_plan="sms_only")
    result = simulate(timing(terminal=600 + after_expiry_s, outcome="delivered"), policy)
    assert result.final_state == State.EXPIRED
    assert result.claims[Channel.SMS] == ClaimState.DELIVERED  # the evidence is kept all the same
    assert result.expired_without_outcome


def test_an_event_that_leaves_the_margin_in_time_is_not_paged(db):
    policy = PolicyVersionFactory.build(channel_plan="sms_only")
    result = simulate(timing(terminal=560, outcome="delivered"), policy)
    assert not result.paged  # delivered at 560 s, before the budget (597 - t) falls under 30 s


def test_a_failed_email_is_an_outcome_not_an_expiry(db):
    result = simulate(timing(terminal=4, outcome="failed", email_outcome="failed"), PolicyVersionFactory.build())
    assert result.final_state == State.EMAIL_FAILED
    assert not result.expired_without_outcome


def test_an_email_accepted_on_its_retry_after_a_deferral_is_accepted(db):
    # Version 2 records each call: a 451 after 0.3 s, then an acceptance after 0.5 s on the retry.
    # As one call from the first attempt to the final answer (version 1's measure) it would look
    # 30 s long, past the exchange's deadline, and replay would invent an unknown outcome.
    calls = (Call(0.3, "transient"), Call(0.5, "accepted"))
    record = timing(terminal=4, outcome="failed", email=30.8)._replace(email_calls=calls)
    result = simulate(record, PolicyVersionFactory.build(email_attempt_limit=3))
    assert result.final_state == State.EMAIL_ACCEPTED
    assert result.claims[Channel.EMAIL] == ClaimState.ACCEPTED


def test_an_email_deferred_more_often_than_the_policy_allows_is_given_up(db):
    calls = (Call(0.3, "transient"), Call(0.3, "transient"), Call(0.5, "accepted"))
    record = timing(terminal=4, outcome="failed")._replace(email_calls=calls)
    result = simulate(record, PolicyVersionFactory.build(email_attempt_limit=2))
    assert result.final_state == State.EMAIL_FAILED


def test_an_sms_refused_once_is_sent_again_and_its_receipt_timed_from_the_accepted_call(db):
    record = timing(terminal=5, outcome="delivered")._replace(sms_calls=(Call(0.2, "transient"), Call(0.4, "accepted")))
    result = simulate(record, PolicyVersionFactory.build())
    assert (result.final_state, result.sms_attempts) == (State.SMS_DELIVERED, 2)
    # Retried a poll interval (10 s) after the refusal's answer; delivered 5 s after that call began.
    assert result.sms_delivered_at == pytest.approx(0.2 + 10 + 5)


@pytest.mark.parametrize(("poll_interval", "final_state"), [(10, State.SMS_DELIVERED), (45, State.EMAIL_ACCEPTED)])
def test_a_receipt_found_by_polling_depends_on_the_poll_interval(db, poll_interval, final_state):
    # Its callback was lost: a poll at or after 50 s finds it. Every 10 s, one does before D (60 s);
    # every 45 s, the poll after 45.5 s would be at 90.5 s, so the email goes at D.
    record = timing(terminal=50, outcome="delivered")._replace(sms_receipt="poll")
    result = simulate(record, PolicyVersionFactory.build(poll_interval=timedelta(seconds=poll_interval)))
    assert result.final_state == final_state
    if final_state == State.SMS_DELIVERED:
        assert result.sms_delivered_at == pytest.approx(50.5)  # the poll 10 s after the one at 40.5 s


@pytest.mark.parametrize("poll_interval", [10, 45])
def test_a_receipt_that_came_by_callback_does_not_wait_for_a_poll(db, poll_interval):
    record = timing(terminal=50, outcome="delivered")
    result = simulate(record, PolicyVersionFactory.build(poll_interval=timedelta(seconds=poll_interval)))
    assert (result.final_state, result.sms_delivered_at) == (State.SMS_DELIVERED, 50)
