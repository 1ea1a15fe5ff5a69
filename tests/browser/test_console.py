"""A responder in a real browser: log in, find the event, watch it change in place, open it, act."""

import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from notify.rules.vocabulary import State
from plumbing.clock import system_clock
from tests.browser.conftest import PASSWORD
from tests.factories import PolicyVersionFactory, new_event
from tests.notify.workers import next_phone, step

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def policy(db):
    # A roomy SMS budget: the event stays in SMS states while the test watches it.
    return PolicyVersionFactory.create(sms_budget=timedelta(seconds=240))


def _scripted(simulator, **script):
    phone = next_phone()
    simulator.control.script_sms(phone, callbacks="drop", **script)
    return new_event(system_clock.now(), phone=phone)


def _log_in(page, live_server):
    page.goto(f"{live_server.url}/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
    page.fill("#id_username", "rita")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    expect(page.get_by_role("heading", name="Open events")).to_be_visible()


def test_a_responder_watches_the_list_update_in_place_as_the_worker_advances(
    page, live_server, responder, policy, simulator, transports
):
    event = _scripted(simulator, create=["accept"], statuses=[["sent", 0]])
    _log_in(page, live_server)
    row = page.locator(f'tr[data-event="{event.id}"]')
    expect(row.locator("td[data-state]")).to_have_text(State.SMS_REQUESTED)
    page.evaluate("window.notReloaded = true")

    step(event.id, transports, system_clock, max_actions=1)  # the worker submits the SMS; the provider accepts it

    expect(row.locator("td[data-state]")).to_have_text(State.SMS_PENDING, timeout=15_000)
    assert page.evaluate("window.notReloaded") is True, "the list was reloaded instead of refreshed in place"
    assert page.problems == []


def test_a_responder_opens_an_event_from_its_deep_link_and_claims_the_fallback(
    page, live_server, responder, policy, simulator, transports
):
    event = _scripted(simulator, create=["reject"])
    step(event.id, transports, system_clock, max_actions=1)  # the provider rejects the SMS: sms_failed
    _log_in(page, live_server)

    page.goto(f"{live_server.url}/events/{event.id}")  # the link a page carries
    expect(page.locator("[data-state]")).to_have_text(State.SMS_FAILED)
    expect(page.locator("[data-fallback]")).to_have_text("Allowed now.")
    expect(page.locator("#runbook summary")).to_have_text("Runbook: fallback-due")

    page.get_by_role("button", name="Claim the email fallback now").click()

    expect(page.locator(".messages")).to_contain_text("Email fallback claimed")
    expect(page.locator("[data-state]")).to_have_text(State.EMAIL_CLAIMED)
    page.evaluate("window.notReloaded = true")

    step(event.id, transports, system_clock, max_actions=1)  # the worker submits the email; the SMTP sink accepts it

    expect(page.locator("[data-state]")).to_have_text(State.EMAIL_ACCEPTED, timeout=10_000)
    expect(page.locator("[data-allowed]")).to_have_text("None: the event is terminal.")
    assert page.evaluate("window.notReloaded") is True
    assert page.problems == []


def test_a_responder_marks_an_event_for_follow_up(page, live_server, responder, policy, simulator):
    event = _scripted(simulator, create=["accept"])
    _log_in(page, live_server)
    page.fill("#q", event.id)
    page.get_by_role("button", name="Open").click()
    expect(page).to_have_url(f"{live_server.url}/events/{event.id}")

    page.fill("textarea[name=note]", "ask the carrier about delays")
    page.get_by_role("button", name="Add note").click()

    expect(page.locator(".messages")).to_contain_text("Marked for follow-up.")
    expect(page.locator("#live")).to_contain_text("ask the carrier about delays")
    expect(page.locator(".audit")).to_contain_text("rita marked for follow-up")
