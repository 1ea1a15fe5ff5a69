"""An event whose worker step keeps raising is paged, counted in /metrics and shown as failing.

The step is really run (the worker against the simulator); the event is poisoned as a version
skew would: its time zone is one this worker cannot load.
"""

import json

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from notify.models import Event
from runbook.models import Page, PageReason
from runbook.paging import pager, risk
from tests.factories import CANARY_EMAIL, PolicyVersionFactory
from tests.notify.workers import scripted_event, step
from tests.runbook.test_metrics import METRICS_TOKEN, scrape

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def paging_policy(db):
    return PolicyVersionFactory.create(alert_mode="page")


@pytest.fixture(autouse=True)
def metrics_token(settings):
    settings.METRICS_TOKEN = METRICS_TOKEN


def failing_steps(simulator, transports, clock, times, **fields):
    """An event (plenty of budget left) whose step raised ``times`` times in a row."""
    event = scripted_event(simulator, clock, **fields)
    Event.objects.filter(pk=event.id).update(time_zone="Mars/Olympus_Mons")
    for _ in range(times):
        report = step(event.id, transports, clock)
        assert report.result == "failed"
        clock.advance(report.wake_after.total_seconds())
    return Event.objects.get(pk=event.id)


def test_an_event_failing_below_the_threshold_is_not_paged(paging_policy, clock, simulator, transports):
    failing_steps(simulator, transports, clock, settings.NOTIFY_FAILING_AFTER - 1)

    assert risk.evaluate(clock.now()).opened == 0


def test_a_failing_event_is_paged_with_what_to_look_at_and_nothing_personal(
    paging_policy, clock, simulator, transports, pager_receiver
):
    event = failing_steps(simulator, transports, clock, settings.NOTIFY_FAILING_AFTER, email=CANARY_EMAIL)
    assert event.act_by - clock.now() > paging_policy.page_margin  # not at risk: paged for failing

    assert risk.evaluate(clock.now()).opened == 1
    page = Page.objects.get(event=event)
    assert page.reason == PageReason.STEP_FAILING
    assert pager.deliver_due(clock).sent == 1

    [trigger] = pager_receiver.messages
    payload = trigger["payload"]
    assert (trigger["dedup_key"], payload["class"]) == (event.id, "reset_delivery_step_failing")
    assert "ZoneInfoNotFoundError" in payload["summary"]
    assert "ZoneInfoNotFoundError" in payload["custom_details"]["look_at"]
    assert CANARY_EMAIL not in json.dumps(trigger)


def test_failing_events_and_step_failures_are_in_metrics(policy, clock, simulator, transports, client):
    failing_steps(simulator, transports, clock, settings.NOTIFY_FAILING_AFTER)
    failing_steps(simulator, transports, clock, 1)  # one failure: counted, not failing

    metrics = scrape(client)

    assert metrics[("reset_delivery_failing_events", (("region", "US"),))] == 1
    assert metrics[("reset_delivery_step_failures_total", (("region", "US"),))] == settings.NOTIFY_FAILING_AFTER + 1


def test_the_console_shows_a_failing_event_and_its_error_class(policy, clock, simulator, transports, client):
    event = failing_steps(simulator, transports, clock, settings.NOTIFY_FAILING_AFTER)
    client.force_login(User.objects.create_superuser("root", password="correct horse battery staple"))

    listed = client.get("/").content.decode()
    detail = client.get(f"/events/{event.id}").content.decode()

    assert "step failing" in listed
    assert "ZoneInfoNotFoundError" in detail
    assert f"raised <code>ZoneInfoNotFoundError</code> {settings.NOTIFY_FAILING_AFTER} times in a row" in detail
    assert "Runbook: step-failing" in detail
