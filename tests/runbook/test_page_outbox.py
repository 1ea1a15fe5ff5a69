"""The page outbox under a pager in trouble: slow, throttling, failing; and pages that say what is true now."""

import time
from datetime import UTC, datetime, timedelta

import pytest

from notify import tallies
from notify.rules.vocabulary import Normalized, Source, State
from runbook import tasks
from runbook.models import Page, PagerQuota
from runbook.paging import pager, pagerduty, quota, risk
from tests.factories import PolicyVersionFactory
from tests.runbook.events import event_in, observe

# The outbox of single pages, many at once: no surge groups them here (tests/runbook/test_surges.py).
NO_SURGE = 1_000_000

# The factory policy: page margin 30 s; an SMS still pending needs 9 s of steps (with its
# fallback), so it goes at risk 39 s before its expiry. One second after that, with 29 s of
# budget left, is when these tests start.
AT_RISK = 600 - 9 - 29


def eu_paging_policy():
    return PolicyVersionFactory.create(
        region="EU", alert_mode="page", allowed_sms_country_codes=[44], surge_threshold=NO_SURGE
    )


@pytest.fixture
def paging_policy(db):
    return PolicyVersionFactory.create(alert_mode="page", surge_threshold=NO_SURGE)


def at_risk_pages(clock, count, **fields):
    events = [event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600), **fields) for _ in range(count)]
    clock.advance(AT_RISK)
    assert risk.evaluate(clock.now()).opened == count
    return events


def test_the_page_says_what_is_due_now_not_what_a_dead_worker_stored(paging_policy, clock, pager_receiver):
    event = event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    assert event.next_action == "poll_sms"
    clock.advance(AT_RISK)  # past the fallback deadline, and no worker has written since
    risk.evaluate(clock.now())
    assert Page.objects.get().next_action == "claim_email"
    pager.deliver_due(clock)
    [trigger] = pager_receiver.messages
    assert trigger["payload"]["custom_details"]["next_action"] == "claim_email"


def test_a_trigger_is_rechecked_and_not_sent_for_an_event_that_ended_since_its_page_opened(
    paging_policy, clock, pager_receiver
):
    [event] = at_risk_pages(clock, 1)
    # Delivered before any delivery run, and before the evaluator has seen it end.
    observe(event.id, Normalized.DELIVERED, clock.now(), source=Source.CALLBACK)
    assert pager.deliver_due(clock) == pager.Delivered(sent=0, failed=0, skipped=1)
    assert pager_receiver.messages == []
    page = Page.objects.get()
    assert (page.trigger_sent_at, page.next_attempt_at) == (None, None)
    assert page.last_error == "no trigger sent: the event is sms_delivered, nothing left to do"
    risk.evaluate(clock.now())  # the evaluator resolves it: still nothing to send
    pager.deliver_due(clock)
    assert pager_receiver.messages == []


def test_the_event_page_says_why_no_trigger_went_out(console, viewer, paging_policy, clock, pager_receiver):
    from django.urls import reverse

    [event] = at_risk_pages(clock, 1)
    observe(event.id, Normalized.DELIVERED, clock.now(), source=Source.CALLBACK)
    pager.deliver_due(clock)
    body = console(viewer).get(reverse("runbook:event", args=[event.id])).content.decode()
    assert "no trigger sent: the event is sms_delivered, nothing left to do</dd>" in body
    assert "not delivered yet" not in body


def test_a_page_that_never_sent_anything_leaves_the_outbox_when_its_event_ends(paging_policy, clock, pager_receiver):
    [event] = at_risk_pages(clock, 1)
    pager_receiver.status = 503
    pager.deliver_due(clock)
    assert Page.objects.get().next_attempt_at is not None  # backing off
    observe(event.id, Normalized.DELIVERED, clock.now(), source=Source.CALLBACK)
    risk.evaluate(clock.now())
    page = Page.objects.get()
    assert (page.resolved_at, page.next_attempt_at) == (clock.now(), None)  # owes nothing, spends no claim


def test_a_trigger_for_an_event_past_its_expiry_is_not_sent(paging_policy, clock, pager_receiver):
    at_risk_pages(clock, 1)
    clock.advance(60)  # expired, though the sweeper has not marked it yet
    pager.deliver_due(clock)
    assert pager_receiver.messages == []


def test_trigger_and_resolve_back_off_separately_and_never_past_a_quarter_of_the_margin(
    paging_policy, clock, pager_receiver
):
    [event] = at_risk_pages(clock, 1)
    pager_receiver.status = 503
    waits = []
    for _ in range(5):
        pager.deliver_due(clock)
        wait = (Page.objects.get().next_attempt_at - clock.now()).total_seconds()
        waits.append(wait)
        clock.advance(wait)
    # 2 s doubling, capped at 7.5 s (the factory's 30 s margin / 4): a trigger retried this
    # way lands well inside the margin it warns about.
    assert waits == [2, 4, 7.5, 7.5, 7.5]
    pager_receiver.status = 202
    pager.deliver_due(clock)
    observe(event.id, Normalized.DELIVERED, clock.now(), source=Source.CALLBACK)
    risk.evaluate(clock.now())
    pager_receiver.status = 503
    pager.deliver_due(clock)
    page = Page.objects.get()
    # The resolve's first failure waits the shortest time: the trigger's failures are not its own.
    assert (page.trigger_failures, page.resolve_failures) == (0, 1)
    assert page.next_attempt_at - clock.now() == timedelta(seconds=2)
    assert tallies.value_of(tallies.PAGE_DELIVERY_FAILURES, "US", "trigger") == 5
    assert tallies.value_of(tallies.PAGE_DELIVERY_FAILURES, "US", "resolve") == 1
    pager_receiver.status = 202
    clock.advance(2)
    pager.deliver_due(clock)
    assert pager_receiver.actions() == [("trigger", event.id), ("resolve", event.id)]


def test_a_429_pauses_every_page_of_its_routing_key_for_the_retry_after_it_asked(
    paging_policy, clock, pager_receiver, settings
):
    PolicyVersionFactory.create(
        region="EU", alert_mode="page", allowed_sms_country_codes=[44], surge_threshold=NO_SURGE
    )
    us = [event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600)) for _ in range(3)]
    [eu] = [event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600), region="EU", phone="+447911123456")]
    clock.advance(AT_RISK)
    risk.evaluate(clock.now())
    settings.PAGER_CONCURRENCY = 1  # one call at a time: the 429 lands before the next US call
    pager_receiver.status, pager_receiver.retry_after = 429, "20"
    outcome = pager.deliver_due(clock)
    # One US call met the 429 (the other US pages were held back); EU's key was throttled too
    # by this receiver, which answers every call alike.
    assert outcome.failed == 2
    first = Page.objects.filter(event_id__in=[event.id for event in us], attempts=1).get()
    assert first.next_attempt_at == clock.now() + timedelta(seconds=20)
    assert first.last_error == "pager answered 429"

    pager_receiver.status, pager_receiver.retry_after = 202, None
    clock.advance(10)
    pager.deliver_due(clock)
    assert pager_receiver.actions() == []  # both keys still paused
    clock.advance(10)
    pager.deliver_due(clock)
    assert sorted(pager_receiver.actions()) == sorted(("trigger", event.id) for event in [*us, eu])


@pytest.mark.parametrize("held", ["paused", "out_of_quota"])
def test_pages_of_a_held_back_key_do_not_hold_back_another_keys(held, paging_policy, clock, pager_receiver, settings):
    PolicyVersionFactory.create(
        region="EU", alert_mode="page", allowed_sms_country_codes=[44], surge_threshold=NO_SURGE
    )
    us = at_risk_pages(clock, pager.BATCH + 30)  # more than one run takes, all ahead of EU's
    clock.advance(1)
    eu = event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600), region="EU", phone="+447911123456")
    clock.advance(AT_RISK)
    assert risk.evaluate(clock.now()).opened == 1
    quota.take("routing-key-us", quota.BURST, clock.now())  # US sent its burst
    if held == "paused":
        quota.pause("routing-key-us", clock.now() + timedelta(minutes=10))  # and met a 429
    else:
        settings.PAGER_EVENTS_PER_MINUTE = 1

    pager.deliver_due(clock)

    assert pager_receiver.actions() == [("trigger", eu.id)]
    assert not Page.objects.filter(event__in=us, attempts__gt=0).exists()  # none claimed for nothing


def test_due_pages_are_taken_from_each_routing_key_in_turn(paging_policy, clock, pager_receiver):
    PolicyVersionFactory.create(
        region="EU", alert_mode="page", allowed_sms_country_codes=[44], surge_threshold=NO_SURGE
    )
    at_risk_pages(clock, pager.BATCH)
    clock.advance(1)
    for _ in range(3):
        event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600), region="EU", phone="+447911123456")
    clock.advance(AT_RISK)
    risk.evaluate(clock.now())

    due = pager._due(clock.now())

    assert len(due) == pager.BATCH
    assert [key for _, key in due[:6]] == ["routing-key-us", "routing-key-eu"] * 3


def test_all_deliverers_together_stay_under_the_pagers_rate_limit(paging_policy, clock, pager_receiver, settings):
    settings.PAGER_EVENTS_PER_MINUTE = 60  # one a second after the burst
    at_risk_pages(clock, 25)
    assert pager.deliver_due(clock).sent == 20  # the burst
    assert pager.deliver_due(clock).sent == 0  # another deliverer, the same moment: the same bucket
    clock.advance(3)
    assert pager.deliver_due(clock).sent == 3
    assert len(pager_receiver.messages) == 23
    assert PagerQuota.objects.get().key_digest != "routing-key-us"  # the key itself is not stored


def test_pages_with_nothing_left_to_send_spend_no_quota(paging_policy, clock, pager_receiver, settings):
    settings.PAGER_EVENTS_PER_MINUTE = 60
    events = at_risk_pages(clock, 30)
    ended, open_ones = events[:10], events[10:]
    for event in ended:  # each ends before any delivery run: its page sends nothing
        observe(event.id, Normalized.DELIVERED, clock.now(), source=Source.CALLBACK)
    outcome = pager.deliver_due(clock)
    assert (outcome.sent, outcome.skipped) == (20, 10)  # the whole burst went to the open events
    assert {key for _, key in pager_receiver.actions()} == {event.id for event in open_ones}


def test_the_pages_beyond_the_quota_wait_for_the_next_run_and_lose_nothing(
    paging_policy, clock, pager_receiver, settings
):
    settings.PAGER_EVENTS_PER_MINUTE = 60
    events = at_risk_pages(clock, 23)
    assert pager.deliver_due(clock).sent == 20
    put_back = Page.objects.filter(trigger_sent_at__isnull=True)
    assert put_back.count() == 3
    assert all(page.next_attempt_at <= clock.now() for page in put_back)  # due, not held
    clock.advance(3)
    assert pager.deliver_due(clock).sent == 3
    assert sorted(key for _, key in pager_receiver.actions()) == sorted(event.id for event in events)


def test_calls_run_side_by_side_but_never_more_than_the_configured_concurrency(
    paging_policy, clock, pager_receiver, settings
):
    settings.PAGER_CONCURRENCY = 3
    pager_receiver.delay = 0.3
    at_risk_pages(clock, 7)
    assert pager.deliver_due(clock).sent == 7
    assert pager_receiver.most_in_flight == 3


def test_a_pager_that_dribbles_its_answer_is_cut_off_at_the_deadline(paging_policy, clock, pager_receiver, settings):
    settings.PAGER_TIMEOUT = 0.5
    pager_receiver.dribble = 0.2  # a byte every 0.2 s: every read is quick, the answer takes 5 s
    at_risk_pages(clock, 1)
    started = time.monotonic()
    assert pager.deliver_due(clock).failed == 1
    assert time.monotonic() - started < 3  # cut at the deadline, not when the dribble ends
    page = Page.objects.get()
    assert page.trigger_uncertain  # the pager may have taken it
    assert page.last_error == "no answer within 0.5s waiting for the pager"


@pytest.mark.parametrize(
    ("header", "pause"),
    [
        ("7", timedelta(seconds=7)),
        ("Fri, 01 Jan 2026 12:00:30 GMT", timedelta(seconds=30)),
        ("3600", pagerduty.LONGEST_PAUSE),
        ("soon", None),
        (None, None),
    ],
)
def test_retry_after_is_read_as_seconds_or_a_date_and_bounded(header, pause):
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert pagerduty.retry_after(header, now) == pause


def test_an_evaluation_that_waited_in_its_queue_runs_and_the_ones_queued_behind_it_coalesce(
    paging_policy, clock, settings, caplog
):
    settings.NOTIFY_RISK_INTERVAL = 5.0
    event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    assert "coalesced" not in tasks.evaluate_risk()
    clock.advance(AT_RISK)  # the lane was stalled this long: a pile of evaluations waits
    assert tasks.evaluate_risk()["opened"] == 1
    assert "risk_evaluation_caught_up" in caplog.text
    assert tasks.evaluate_risk() == {"coalesced": 1}
    clock.advance(5)
    assert "coalesced" not in tasks.evaluate_risk()
