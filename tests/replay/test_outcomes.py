"""Hand-computed cases for each counted outcome.

The factory policy: SMS budget 60 s, fallback reserve 120 s, poll every 10 s, page margin
30 s; remaining steps cost 9 s from the SMS states (2 poll + 1 select + 5 email + 1 record),
7 s after a failed SMS, 6 s once the email is claimed, 3 s for an SMS with no fallback.
"""

from datetime import timedelta

from notify.states import State
from runbook.replay.simulate import simulate
from runbook.replay.timings import Timing
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


def test_a_fallback_claimed_with_less_than_the_email_step_left_is_useless(db):
    # A reserve smaller than the email step (a policy validation refuses it; the count is what
    # is tested here): D = min(0 + 600, 600 - 3) = 597 s, claimed with 3 s left.
    policy = PolicyVersionFactory.build(sms_budget=timedelta(seconds=600), fallback_reserve=timedelta(seconds=3))
    result = simulate(timing(), policy)
    assert result.claim_remaining_s == 3.0
    assert result.useless_fallback  # 3 s < email submit 5 s + record 1 s


def test_an_sms_submit_slower_than_the_timeout_is_looked_up_and_sent_again_until_found(db, settings):
    settings.TWILIO_TIMEOUT = 10
    settings.NOTIFY_SMS_LOOKUP_DELAY = timedelta(seconds=2)
    # Accepted 15 s after the submit: unknown at 10 s, not found at 12 s (sent again), unknown at
    # 22 s, found at 24 s; the receipt (timed from the first submit) arrives at 30 s.
    result = simulate(timing(accept=15, terminal=30, outcome="delivered"), PolicyVersionFactory.build())
    assert result.states == ["sms_requested", "sms_pending", "sms_delivered"]
    assert result.sms_delivered_at == 30.0


def test_a_delivery_receipt_before_the_submits_answer_counts(db, settings):
    settings.TWILIO_TIMEOUT = 10
    result = simulate(timing(accept=8, terminal=3, outcome="delivered"), PolicyVersionFactory.build())
    assert result.states == ["sms_requested", "sms_pending", "sms_delivered"]
    assert result.sms_delivered_at == 8.0  # not before the provider has the message


def test_an_email_whose_answers_are_lost_is_resent_then_given_up_per_the_policy(db, settings):
    settings.EMAIL_TIMEOUT = 5
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


def test_an_event_that_leaves_the_margin_in_time_is_not_paged(db):
    policy = PolicyVersionFactory.build(channel_plan="sms_only")
    result = simulate(timing(terminal=560, outcome="delivered"), policy)
    assert not result.paged  # delivered at 560 s, before the budget (597 - t) falls under 30 s


def test_a_failed_email_is_an_outcome_not_an_expiry(db):
    result = simulate(timing(terminal=4, outcome="failed", email_outcome="failed"), PolicyVersionFactory.build())
    assert result.final_state == State.EMAIL_FAILED
    assert not result.expired_without_outcome
