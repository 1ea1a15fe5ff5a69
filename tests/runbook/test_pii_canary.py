"""No page or fragment of the console shows the subscriber's phone, email or reset link."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from notify.models import Observation
from notify.rules import plan
from notify.rules.plan import ObservationInput
from notify.rules.vocabulary import Channel, Normalized, Source, State
from notify.writes import leases, moves
from tests.factories import CANARY_EMAIL, CANARY_PHONE, CANARY_RESET_URL, new_event
from tests.notify.test_crash_recovery import crashing
from tests.notify.workers import run_until_settled, scripted_event, step
from tests.runbook.events import WORKER, event_in, observe, record, sms_submitting

# The worker asserts it never calls a provider inside a transaction: no test-wide one here.
pytestmark = pytest.mark.django_db(transaction=True)

# Every form a destination could take on a page: as given, national, split, URL-quoted.
CANARIES = [
    CANARY_PHONE,
    CANARY_PHONE.lstrip("+"),
    "4155550123",
    "415-555-0123",
    "(415) 555-0123",
    "%2B14155550123",
    CANARY_EMAIL,
    CANARY_EMAIL.split("@")[0],
    "canary.subscriber%40example.org",
    CANARY_RESET_URL,
    "canary-token-7f3a",
]


@pytest.fixture
def admin_user(db):
    return User.objects.create_superuser("root", password="correct horse battery staple")


def _outcomes_that_say_more(simulator, clock, transports):
    """Events showing each outcome kind that says more than its normalized status; the email ones by the real worker.

    Their email goes to the canary address with the canary link (the simulator scripts SMS by
    phone, so those two have a phone of their own).
    """
    # An email whose worker was lost just after handing it over: the next one records a possible duplicate.
    lost = scripted_event(simulator, clock, create=["reject"], email=CANARY_EMAIL)
    step(lost.id, transports, clock, max_actions=2)  # the SMS is refused; the email fallback is claimed
    assert step(lost.id, crashing(transports, "email", "after"), clock).result == "failed"
    run_until_settled(lost.id, transports, clock)
    # A fallback claimed too late for the email to be of use: not sent.
    late = scripted_event(simulator, clock, create=["reject"], email=CANARY_EMAIL, ttl=timedelta(seconds=130))
    step(late.id, transports, clock, max_actions=2)
    clock.advance(127)
    run_until_settled(late.id, transports, clock)
    unresolved = sms_submitting(clock)
    record(
        unresolved.id,
        ObservationInput(Channel.SMS, Source.RECOVERY, Normalized.UNKNOWN_OUTCOME, "lookup_redacted"),
        clock.now(),
    )
    refused = sms_submitting(clock)
    record(
        refused.id,
        ObservationInput(Channel.SMS, Source.SUBMIT, Normalized.CONFIGURATION_ERROR, "http_401_20003"),
        clock.now(),
    )
    shown = set(Observation.objects.values_list("normalized", "raw_status"))
    assert {
        (Normalized.POSSIBLE_DUPLICATE, "holder_lost"),
        (Normalized.NO_USEFUL_LIFE, "no_useful_life"),
        (Normalized.UNKNOWN_OUTCOME, "lookup_redacted"),
        (Normalized.CONFIGURATION_ERROR, "http_401_20003"),
    } <= shown
    return [lost, late, unresolved, refused]


@pytest.fixture
def events(policy, clock, simulator, transports):
    """Events in every shape, some of them through the real worker and the provider simulator."""
    simulator.control.script_sms(CANARY_PHONE, create=["accept"], statuses=[["sent", 0], ["undelivered", 0]])
    worked = new_event(clock.now())
    run_until_settled(worked.id, transports, clock)
    said_more = _outcomes_that_say_more(simulator, clock, transports)
    made = [event_in(state, clock) for state in State if state != State.EXPIRED]
    pending = event_in(State.SMS_PENDING, clock)
    observe(
        pending.id,
        Normalized.PENDING,
        clock.now(),
        source=Source.CALLBACK,
        raw_status="sent",
        payload='{"MessageStatus": "sent", "ErrorCode": null}',
    )
    leases.take(pending.id, WORKER, at=clock.now(), ttl=timedelta(seconds=30))
    note = plan.ObservationInput(Channel.SMS, Source.OPERATOR, Normalized.NOTE, note="carrier delay")
    moves.record_observation(pending.id, note, now=clock.now(), actor="operator:root")
    clock.advance(700)
    expired = made[0]
    moves.expire(expired.id, now=clock.now(), actor="sweeper")
    return [worked, *said_more, *made, pending]


def _pages(events) -> list[tuple[str, dict[str, str]]]:
    pages: list[tuple[str, dict[str, str]]] = [
        ("/", {}),
        ("/", {"HTTP_HX_REQUEST": "true"}),
        ("/?state=sms_pending&region=US", {"HTTP_HX_REQUEST": "true"}),
        ("/admin/notify/event/", {}),
    ]
    for event in events:
        for name in ("runbook:event", "runbook:raw-statuses"):
            pages.append((reverse(name, args=[event.id]), {}))
        pages.append((reverse("runbook:event", args=[event.id]), {"HTTP_HX_REQUEST": "true"}))
        pages.append((f"/admin/notify/event/{event.id}/change/", {}))
    return pages


def test_no_console_page_or_fragment_shows_personal_data(console, admin_user, events):
    client = console(admin_user)
    checked = 0
    for url, headers in _pages(events):
        response = client.get(url, **headers)
        assert response.status_code == 200, url
        body = response.content.decode()
        for canary in CANARIES:
            assert canary not in body, f"{canary!r} on {url} {headers}"
        checked += 1
    assert checked == 4 + 4 * len(events)


def test_action_responses_show_no_personal_data(console, admin_user, events):
    client = console(admin_user)
    failed = next(event for event in events if event.state == State.SMS_FAILED)
    responses = [
        client.post(reverse("runbook:follow-up", args=[failed.id]), {"note": CANARY_PHONE}, follow=True),
        client.post(reverse("runbook:claim-fallback", args=[failed.id]), {"version": failed.version}, follow=True),
        client.post(reverse("runbook:release-lease", args=[failed.id]), {"lease_token": 0}, follow=True),
    ]
    for response in responses:
        body = response.content.decode()
        for canary in CANARIES:
            assert canary not in body
