"""A surge is one incident: many events of a region at risk at once page once, with their count."""

import json
from datetime import timedelta

import pytest
from django.urls import reverse

from notify.rules.vocabulary import Normalized, Source, State
from runbook.models import Page, PageMode, Surge
from runbook.paging import invariants, pager, risk
from tests.concurrency import race
from tests.factories import CANARY_EMAIL, CANARY_PHONE, CANARY_RESET_URL, PolicyVersionFactory
from tests.runbook.events import event_in, observe

# The factory policy: page margin 30 s; a pending SMS without fallback needs 3 s more.
TTL = timedelta(seconds=600)
INTO_THE_MARGIN = 600 - 3 - 29  # 29 s of action budget left


@pytest.fixture
def surging_policy(db):
    return PolicyVersionFactory.create(alert_mode="page", surge_threshold=3, surge_quiet_period=timedelta(seconds=10))


def pending(clock, count: int, **fields):
    return [event_in(State.SMS_PENDING, clock, ttl=TTL, email="", **fields) for _ in range(count)]


def test_more_events_at_risk_than_the_threshold_page_once_for_the_region(surging_policy, clock, pager_receiver):
    events = pending(clock, 5)
    clock.advance(INTO_THE_MARGIN)

    evaluation = risk.evaluate(clock.now())

    assert (evaluation.opened, evaluation.surges_opened) == (5, 1)
    surge = Surge.objects.get()
    assert (surge.region, surge.mode, surge.at_risk, surge.dominant_state) == ("US", "page", 5, "sms_pending")
    assert surge.most_urgent == sorted(event.id for event in events)  # the same act_by: by id
    assert all(page.surge_id == surge.pk and page.next_attempt_at is None for page in Page.objects.all())
    pager.deliver_due(clock)
    [trigger] = pager_receiver.messages
    assert (trigger["event_action"], trigger["dedup_key"]) == ("trigger", f"surge-US-{surge.pk}")
    assert trigger["payload"]["summary"].startswith("reset_delivery_surge: US: 5 resets at risk since ")
    assert trigger["payload"]["summary"].endswith("most in sms_pending (next: poll_sms)")
    assert trigger["payload"]["custom_details"]["most_urgent"] == surge.most_urgent
    assert trigger["links"][0]["href"] == "http://127.0.0.1:8000/?region=US"
    body = json.dumps(trigger)
    assert not [canary for canary in (CANARY_PHONE, CANARY_EMAIL, CANARY_RESET_URL) if canary in body]


def test_at_or_under_the_threshold_each_event_pages_on_its_own(surging_policy, clock, pager_receiver):
    pending(clock, 3)
    clock.advance(INTO_THE_MARGIN)

    assert risk.evaluate(clock.now()).surges_opened == 0

    pager.deliver_due(clock)
    assert [action for action, _ in pager_receiver.actions()] == ["trigger"] * 3
    assert not Surge.objects.exists()


def test_an_event_going_at_risk_while_the_surge_is_open_is_covered(surging_policy, clock, pager_receiver):
    pending(clock, 4)
    clock.advance(10)
    late = pending(clock, 1)[0]
    clock.advance(INTO_THE_MARGIN - 10)
    risk.evaluate(clock.now())
    pager.deliver_due(clock)

    clock.advance(10)  # the late one is at risk now too
    assert risk.evaluate(clock.now()).opened == 1
    assert Page.objects.get(event_id=late.id).surge == Surge.objects.get()
    pager.deliver_due(clock)
    trigger, update = pager_receiver.messages  # no trigger of the late event's own
    assert (trigger["dedup_key"], update["dedup_key"]) == (
        f"surge-US-{Page.objects.get(event_id=late.id).surge_id}",
    ) * 2
    assert (trigger["payload"]["custom_details"]["at_risk"], update["payload"]["custom_details"]["at_risk"]) == (4, 5)


def test_the_count_is_updated_in_place_at_most_once_per_evaluation_interval(
    surging_policy, clock, pager_receiver, settings
):
    settings.NOTIFY_RISK_INTERVAL = 5.0
    pending(clock, 4)
    clock.advance(2)
    pending(clock, 2)
    clock.advance(INTO_THE_MARGIN - 2)
    risk.evaluate(clock.now())
    pager.deliver_due(clock)  # the trigger: 4 at risk

    clock.advance(2)  # the two later ones are at risk now: 6
    risk.evaluate(clock.now())
    pager.deliver_due(clock)
    assert len(pager_receiver.messages) == 1  # not within the interval of the last message

    clock.advance(3)
    risk.evaluate(clock.now())
    pager.deliver_due(clock)
    first, update = pager_receiver.messages
    assert update["dedup_key"] == first["dedup_key"]
    assert update["payload"]["custom_details"]["at_risk"] == 6


def test_the_surge_resolves_after_a_quiet_period_and_the_events_still_at_risk_page_on_their_own(
    surging_policy, clock, pager_receiver
):
    events = pending(clock, 5)
    clock.advance(INTO_THE_MARGIN)
    risk.evaluate(clock.now())
    pager.deliver_due(clock)
    for event in events[1:]:
        observe(event.id, Normalized.DELIVERED, clock.now(), source=Source.CALLBACK, raw_status="delivered")

    clock.advance(1)
    risk.evaluate(clock.now())  # one at risk: quiet from now
    surge = Surge.objects.get()
    assert (surge.at_risk, surge.quiet_since, surge.resolved_at) == (1, clock.now(), None)
    clock.advance(9)
    assert risk.evaluate(clock.now()).surges_resolved == 0
    clock.advance(1)
    assert risk.evaluate(clock.now()).surges_resolved == 1

    pager.deliver_due(clock)
    actions = [(message["event_action"], message["dedup_key"]) for message in pager_receiver.messages]
    assert actions == [
        ("trigger", f"surge-US-{surge.pk}"),
        ("resolve", f"surge-US-{surge.pk}"),
        ("trigger", events[0].id),  # still at risk: it pages on its own now
    ]
    assert Page.objects.get(event_id=events[0].id).surge is None


def test_observe_mode_records_the_surge_without_sending_it(db, clock, pager_receiver):
    PolicyVersionFactory.create(alert_mode="observe", surge_threshold=3)
    pending(clock, 5)
    clock.advance(INTO_THE_MARGIN)

    assert risk.evaluate(clock.now()).surges_opened == 1

    assert Surge.objects.get().mode == PageMode.OBSERVE
    pager.deliver_due(clock)
    assert pager_receiver.messages == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_racing_evaluators_open_one_surge(clock, pager_receiver):
    PolicyVersionFactory.create(alert_mode="page", surge_threshold=3)
    pending(clock, 5)
    clock.advance(INTO_THE_MARGIN)

    race(lambda _: risk.evaluate(clock.now()), count=4)

    assert Surge.objects.count() == 1
    assert Page.objects.filter(surge__isnull=False).count() == 5


def test_the_review_counts_incidents_with_and_without_surges_and_lists_them(
    surging_policy, clock, pager_receiver, console, viewer
):
    pending(clock, 5)
    clock.advance(INTO_THE_MARGIN)
    risk.evaluate(clock.now())
    pager.deliver_due(clock)

    response = console(viewer).get(reverse("runbook:page-review"))

    [day] = response.context["days"]
    assert (day["paged"], day["covered"], day["surges"], day["incidents"]) == (5, 5, 1, 1)
    [surge] = response.context["surges"]
    assert (surge.region, surge.most_at_risk) == ("US", 5)
    assert 'id="surges"' in response.content.decode()


def test_the_list_shows_a_banner_while_a_surge_is_open(surging_policy, clock, pager_receiver, console, viewer):
    PolicyVersionFactory.create(region="EU", allowed_sms_country_codes=[44])
    pending(clock, 5)
    clock.advance(INTO_THE_MARGIN)
    risk.evaluate(clock.now())

    body = console(viewer).get(reverse("runbook:events")).content.decode()

    assert 'data-surge="US"' in body
    assert "Surge in US:</strong> 5 events at risk" in body
    assert 'data-surge="US"' not in console(viewer).get(reverse("runbook:events") + "?region=EU").content.decode()


def test_a_covered_page_counts_as_told_once_its_surge_trigger_landed(surging_policy, clock, pager_receiver):
    pending(clock, 5)
    clock.advance(INTO_THE_MARGIN)
    risk.evaluate(clock.now())
    assert [v.kind for v in invariants.check(pager_receiver.log, in_flight=timedelta(seconds=5))] == [
        "undelivered_trigger"
    ] * 5  # nothing landed yet: each open event is untold

    pager.deliver_due(clock)

    assert invariants.check(pager_receiver.log, in_flight=timedelta(seconds=5)) == []


def test_a_page_a_deliverer_already_took_up_keeps_its_own_course(surging_policy, clock, pager_receiver):
    first = pending(clock, 1)[0]
    clock.advance(1)
    pending(clock, 4)
    clock.advance(INTO_THE_MARGIN - 1)
    risk.evaluate(clock.now())  # the first alone is at risk: its own page
    # A deliverer has claimed it and its trigger is on its way (the claim bumps attempts).
    Page.objects.filter(event_id=first.id).update(attempts=1, next_attempt_at=clock.now() + timedelta(seconds=10))

    clock.advance(1)
    assert risk.evaluate(clock.now()).surges_opened == 1  # five at risk now

    assert Page.objects.get(event_id=first.id).surge is None  # its outcome is recorded under its own fence
    assert Page.objects.filter(surge__isnull=False).count() == 4


def test_pages_covered_by_a_surge_resolved_meanwhile_page_on_their_own(surging_policy, clock, pager_receiver):
    pending(clock, 5)
    clock.advance(INTO_THE_MARGIN)
    risk.evaluate(clock.now())
    Surge.objects.update(resolved_at=clock.now())  # a racing evaluator resolved it after this one covered

    clock.advance(1)
    risk.evaluate(clock.now())

    assert not Page.objects.filter(surge__resolved_at__isnull=False).exists()
    assert all(page.next_attempt_at is not None for page in Page.objects.filter(surge__isnull=True))
