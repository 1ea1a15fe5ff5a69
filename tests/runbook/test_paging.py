"""Paging on an exhausted action budget: who pages, who does not, and that a page is never lost."""

import json
from datetime import timedelta

import pytest

from notify.rules.vocabulary import Normalized, Source, State
from runbook.models import Page, PageMode
from runbook.paging import pager, risk
from runbook.paging.pagerduty import PagerError
from tests.concurrency import race
from tests.factories import CANARY_EMAIL, CANARY_PHONE, CANARY_RESET_URL, PolicyVersionFactory, new_event
from tests.runbook.events import event_in, observe

# The factory policy: page margin 30 s; remaining steps cost 9 s from the SMS states, 7 s after
# a failed SMS, 6 s once the email is claimed, 3 s for an SMS with no fallback behind it.


@pytest.fixture
def paging_policy(db):
    return PolicyVersionFactory.create(alert_mode="page")


def test_a_terminal_sms_failure_with_time_for_the_email_pages_nothing(paging_policy, clock, pager_receiver):
    event_in(State.SMS_FAILED, clock, ttl=timedelta(seconds=600))
    clock.advance(60)
    assert risk.evaluate(clock.now()).opened == 0
    assert not Page.objects.exists()
    pager.deliver_due(clock)
    assert pager_receiver.messages == []


def test_a_pending_sms_with_almost_no_time_left_pages(paging_policy, clock, pager_receiver):
    event = event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600), email="")
    clock.advance(600 - 3 - 31)  # 31 s of budget: not yet
    assert risk.evaluate(clock.now()).opened == 0
    clock.advance(2)  # 29 s: within the 30 s margin
    assert risk.evaluate(clock.now()).opened == 1
    page = Page.objects.get()
    assert (page.event_id, page.mode, page.state, page.budget_seconds) == (event.id, PageMode.PAGE, "sms_pending", 29)

    assert pager.deliver_due(clock).sent == 1
    [trigger] = pager_receiver.messages
    assert trigger["event_action"] == "trigger"
    assert trigger["dedup_key"] == event.id
    assert trigger["routing_key"] == "routing-key-us"
    assert trigger["payload"]["summary"].startswith("reset_delivery_deadline_at_risk")
    assert trigger["payload"]["custom_details"]["remaining_budget_seconds"] == 29
    assert trigger["payload"]["custom_details"]["state"] == "sms_pending"
    assert trigger["links"][0]["href"] == f"http://127.0.0.1:8000/events/{event.id}"


def test_an_expired_event_is_not_paged_because_nothing_is_left_to_do(paging_policy, clock, pager_receiver):
    new_event(clock.now(), ttl=timedelta(seconds=600))
    clock.advance(601)  # past expiry, not yet marked expired
    evaluation = risk.evaluate(clock.now())
    assert (evaluation.opened, evaluation.not_pageable) == (0, 1)
    assert not Page.objects.exists()


def test_observe_mode_records_the_would_be_page_without_sending_it(policy, clock, pager_receiver):
    event = event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    clock.advance(600 - 9 - 10)
    assert risk.evaluate(clock.now()).opened == 1
    page = Page.objects.get()
    assert (page.event_id, page.mode, page.next_attempt_at) == (event.id, PageMode.OBSERVE, None)
    pager.deliver_due(clock)
    assert pager_receiver.messages == []


def test_an_event_pages_once_however_often_it_is_evaluated(paging_policy, clock, pager_receiver):
    event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    clock.advance(600 - 9 - 10)
    assert risk.evaluate(clock.now()).opened == 1
    clock.advance(5)
    assert risk.evaluate(clock.now()).opened == 0
    pager.deliver_due(clock)
    pager.deliver_due(clock)
    assert [action for action, _ in pager_receiver.actions()] == ["trigger"]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_racing_evaluators_and_deliverers_send_one_page(paging_policy, clock, pager_receiver):
    event = event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    clock.advance(600 - 9 - 10)
    now = clock.now()
    opened = race(lambda i: risk.evaluate(now).opened)
    assert sum(opened) == 1
    assert Page.objects.filter(event=event).count() == 1
    race(lambda i: pager.deliver_due(clock))
    assert pager_receiver.actions() == [("trigger", event.id)]


def test_the_resolve_follows_the_terminal_state(paging_policy, clock, pager_receiver):
    event = event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    clock.advance(600 - 9 - 10)
    risk.evaluate(clock.now())
    pager.deliver_due(clock)
    clock.advance(2)
    assert risk.evaluate(clock.now()).resolved == 0  # still open
    observe(event.id, Normalized.DELIVERED, clock.now(), source=Source.CALLBACK)
    assert risk.evaluate(clock.now()).resolved == 1
    pager.deliver_due(clock)
    assert pager_receiver.actions() == [("trigger", event.id), ("resolve", event.id)]
    page = Page.objects.get()
    assert page.resolve_sent_at == clock.now()
    assert page.next_attempt_at is None


def test_an_unavailable_pager_delays_the_page_but_does_not_lose_it(paging_policy, clock, pager_receiver):
    event = event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    clock.advance(600 - 9 - 10)
    risk.evaluate(clock.now())
    pager_receiver.status = 503
    assert pager.deliver_due(clock).failed == 1
    page = Page.objects.get()
    assert page.trigger_sent_at is None
    assert page.last_error == "pager answered 503"
    assert page.next_attempt_at == clock.now() + timedelta(seconds=2)

    pager_receiver.status = 202
    assert pager.deliver_due(clock).sent == 0  # not due yet: backing off
    clock.advance(2)
    assert pager.deliver_due(clock).sent == 1
    assert pager_receiver.actions() == [("trigger", event.id)]
    assert Page.objects.get().last_error == ""


def test_a_pager_that_cannot_be_reached_at_all_is_retried_too(paging_policy, clock, settings):
    event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    settings.PAGER_EVENTS_URL = "http://127.0.0.1:9/v2/enqueue"  # nothing listens on the discard port
    settings.PAGER_ROUTING_KEYS = {"US": "k"}
    clock.advance(600 - 9 - 10)
    risk.evaluate(clock.now())
    assert pager.deliver_due(clock).failed == 1
    assert Page.objects.get().last_error == "ConnectionRefusedError reaching the pager"


def test_a_region_without_a_routing_key_keeps_its_page_queued(paging_policy, clock, pager_receiver, settings):
    settings.PAGER_ROUTING_KEYS = {}
    event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    clock.advance(600 - 9 - 10)
    risk.evaluate(clock.now())
    assert pager.deliver_due(clock).failed == 1
    page = Page.objects.get()
    assert page.last_error == "no routing key for region US (PAGER_ROUTING_KEYS)"
    assert page.next_attempt_at is not None


def test_an_event_that_ended_before_its_trigger_landed_wakes_nobody(paging_policy, clock, pager_receiver):
    event = event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    clock.advance(600 - 9 - 10)
    risk.evaluate(clock.now())
    pager_receiver.status = 503
    pager.deliver_due(clock)
    observe(event.id, Normalized.DELIVERED, clock.now(), source=Source.CALLBACK)
    risk.evaluate(clock.now())
    pager_receiver.status = 202
    clock.advance(10)
    pager.deliver_due(clock)
    assert pager_receiver.messages == []
    assert Page.objects.get().next_attempt_at is None


def test_the_page_carries_no_personal_data(paging_policy, clock, pager_receiver):
    event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    clock.advance(600 - 9 - 10)
    risk.evaluate(clock.now())
    pager.deliver_due(clock)
    sent = json.dumps(pager_receiver.messages)
    for canary in (CANARY_PHONE, CANARY_PHONE[2:], CANARY_EMAIL, CANARY_RESET_URL, "canary-token"):
        assert canary not in sent


def test_the_review_counts_observed_and_paged_events_by_region_and_day(console, viewer, clock, pager_receiver):
    from django.urls import reverse

    PolicyVersionFactory.create(region="US", alert_mode="page")
    PolicyVersionFactory.create(region="EU", allowed_sms_country_codes=[44])  # observe
    for _ in range(2):
        event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600), region="EU", phone="+447911123456")
    clock.advance(600 - 9 - 10)
    risk.evaluate(clock.now())
    pager.deliver_due(clock)

    response = console(viewer).get(reverse("runbook:page-review"))
    rows = {(day["region"], day["observed"], day["paged"], day["delivered"]) for day in response.context["days"]}
    assert rows == {("US", 0, 2, 2), ("EU", 1, 0, 0)}
    assert len(response.context["latest"]) == 3
    body = response.content.decode()
    assert 'data-region="EU" data-day="2026-01-01"' in body
    assert "not sent (observe)" in body


def test_the_event_page_says_whether_the_event_was_paged(console, viewer, paging_policy, clock, pager_receiver):
    from django.urls import reverse

    event = event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    url = reverse("runbook:event", args=[event.id])
    assert "<dd data-page>none</dd>" in console(viewer).get(url).content.decode()
    clock.advance(600 - 9 - 10)
    risk.evaluate(clock.now())
    pager.deliver_due(clock)
    assert "paged at 12:09:41 UTC, delivered" in console(viewer).get(url).content.decode()


def test_a_trigger_whose_answer_was_lost_is_resolved_when_the_event_ends(
    paging_policy, clock, pager_receiver, settings
):
    event = event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    clock.advance(600 - 9 - 10)
    risk.evaluate(clock.now())
    settings.PAGER_TIMEOUT = 0.2
    pager_receiver.delay = 1.0  # the pager takes the trigger, but its answer never arrives
    assert pager.deliver_due(clock).failed == 1
    assert Page.objects.get().trigger_uncertain
    pager_receiver.delay = 0.0
    observe(event.id, Normalized.DELIVERED, clock.now(), source=Source.CALLBACK)
    risk.evaluate(clock.now())
    clock.advance(10)
    pager.deliver_due(clock)
    # The incident the pager may have opened is closed; no second trigger wakes anyone.
    pager_receiver.wait_for(2)  # the slow answer's trigger is recorded when its handler finishes
    assert sorted(pager_receiver.actions()) == [("resolve", event.id), ("trigger", event.id)]


def test_a_deliverer_whose_hold_ran_out_cannot_overwrite_the_one_that_took_over(paging_policy, clock, pager_receiver):
    event = event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    clock.advance(600 - 9 - 10)
    risk.evaluate(clock.now())
    page = Page.objects.get()

    slow = pager.claim(page.pk, clock)
    assert slow is not None
    # While the first deliverer's call hangs past its hold, another takes the page and lands it.
    clock.advance(pager.claim_hold().total_seconds() + 1)
    assert pager.deliver_due(clock).sent == 1
    pager.record(slow, PagerError("pager answered 503", answered=True), clock)

    page.refresh_from_db()
    assert page.trigger_sent_at is not None
    assert (page.next_attempt_at, page.last_error) == (None, "")  # the late failure recorded nothing
    clock.advance(600)
    pager.deliver_due(clock)
    assert pager_receiver.actions() == [("trigger", event.id)]  # no resolve while the event is open
