"""The event page answers, at a glance: who owns it, what was last seen, the budget, the one next step."""

from datetime import timedelta

import pytest
from django.urls import reverse

from notify import transitions
from notify.states import Channel, Normalized, Source, State
from runbook.status import Situation
from tests.factories import new_event
from tests.runbook.events import WORKER, event_in, observe


@pytest.fixture
def page(console, viewer):
    def get(event, **headers):
        return console(viewer).get(reverse("runbook:event", args=[event.id]), **headers)

    return get


def test_it_shows_the_facts_of_the_event(page, policy, clock):
    event = new_event(clock.now(), ttl=timedelta(seconds=600))
    body = page(event).content.decode()
    assert event.id in body
    assert f"US v{policy.number}" in body
    assert "2026-01-01 12:10:00 UTC" in body  # the reset's expiry
    assert 'data-claim="sms">claimed<' in body


def test_a_live_lease_names_its_holder_and_expiry(page, policy, clock):
    event = new_event(clock.now())
    transitions.take_lease(event.id, WORKER, at=clock.now(), ttl=timedelta(seconds=30))
    status = page(event).context["status"]
    assert status.owner.live
    assert status.owner.holder == WORKER
    assert status.owner.expires_at == clock.now() + timedelta(seconds=30)


def test_an_expired_lease_reads_as_unowned_and_says_why(page, policy, clock):
    event = new_event(clock.now())
    transitions.take_lease(event.id, WORKER, at=clock.now(), ttl=timedelta(seconds=30))
    clock.advance(31)
    response = page(event)
    assert not response.context["status"].owner.live
    assert "its lease expired" in response.content.decode()
    assert response.context["status"].situation == Situation.STUCK_WORKER


def test_an_overdue_unowned_event_is_a_stuck_worker(page, policy, clock):
    event = new_event(clock.now())
    assert page(event).context["status"].situation == Situation.ON_TRACK
    clock.advance(30)
    response = page(event)
    assert "no worker has taken it" in response.content.decode()
    assert response.context["status"].situation == Situation.STUCK_WORKER


def test_the_last_observation_is_the_newest_from_a_provider_not_a_note(page, policy, clock):
    event = event_in(State.SMS_PENDING, clock)
    clock.advance(5)
    observe(event.id, Normalized.PENDING, clock.now(), raw_status="sent")
    clock.advance(5)
    note = transitions.ObservationInput(
        channel=Channel.SMS, source=Source.OPERATOR, normalized=Normalized.NOTE, note="x"
    )
    transitions.record_observation(event.id, note, now=clock.now(), actor="operator:rita")
    last = page(event).context["status"].last_observation
    assert (last.normalized, last.recorded_at) == (Normalized.PENDING, clock.now() - timedelta(seconds=5))


def test_state_age_and_budget_are_two_separate_values(page, policy, clock):
    event = event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    clock.advance(40)
    status = page(event).context["status"]
    assert status.timing.state_age == timedelta(seconds=40)
    # act_by = expiry - (poll 2 + select 1 + email submit 5 + record 1)
    assert status.timing.budget == timedelta(seconds=600 - 9 - 40)


def test_it_states_the_one_transition_still_allowed_in_words(page, policy, clock):
    body = page(event_in(State.SMS_PENDING, clock)).content.decode()
    assert "Wait for the SMS receipt (poll or callback): sms_pending → sms_delivered" in body


def test_it_says_when_the_fallback_becomes_allowed(page, policy, clock):
    status = page(event_in(State.SMS_PENDING, clock)).context["status"]
    assert status.fallback.possible
    assert not status.fallback.claimable_now
    assert status.fallback.text.startswith("Allowed from 12:01:00 UTC")  # created + 60s SMS budget


def test_it_says_plainly_when_the_fallback_is_no_longer_possible(page, policy, clock):
    body = page(event_in(State.SMS_DELIVERED, clock)).content.decode()
    assert "No longer possible: the event is sms_delivered." in body
    assert "None: the event is terminal." in body


def test_it_says_when_the_fallback_was_already_used(page, policy, clock):
    text = page(event_in(State.EMAIL_CLAIMED, clock)).context["status"].fallback.text
    assert text == "Already claimed at 12:00:00 UTC: one email per reset."


def test_an_event_without_an_email_channel_has_no_fallback(page, policy, clock):
    event = new_event(clock.now(), email="")
    status = page(event).context["status"]
    assert not status.fallback.possible
    assert status.fallback.text.startswith("No fallback")


def test_it_lists_the_transition_history_in_order(page, policy, clock):
    event = event_in(State.EMAIL_CLAIMED, clock)
    transitions_ = page(event).context["transitions"]
    assert [(t.from_state, t.to_state) for t in transitions_] == [
        ("", State.SMS_REQUESTED),
        (State.SMS_REQUESTED, State.SMS_FAILED),
        (State.SMS_FAILED, State.EMAIL_CLAIMED),
    ]


def test_the_timeline_marks_deadline_act_by_expiry_and_now(page, policy, clock):
    event = event_in(State.SMS_PENDING, clock)
    clock.advance(20)
    response = page(event)
    timeline = response.context["timeline"]
    assert [mark.kind for mark in timeline.marks] == ["now", "deadline", "act-by", "expiry"]
    assert {point.kind for point in timeline.points} >= {"created", "transition", "obs-accepted"}
    body = response.content.decode()
    assert '<svg class="timeline"' in body
    assert "fallback deadline 12:01:00 UTC" in body


def test_the_raw_provider_status_is_not_on_the_event_page(console, raw_viewer, policy, clock):
    event = event_in(State.SMS_FAILED, clock)
    body = console(raw_viewer).get(reverse("runbook:event", args=[event.id])).content.decode()
    assert "21610" not in body
    raw = console(raw_viewer).get(reverse("runbook:raw-statuses", args=[event.id])).content.decode()
    assert "<code>21610</code>" in raw


def test_an_htmx_refresh_gets_only_the_live_fragment(page, policy, clock):
    event = new_event(clock.now())
    response = page(event, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="live"')
    assert "<html" not in body
    assert "Mark for follow-up" not in body  # the note form is outside, so typing survives a refresh
    assert "HX-Request" in response["Vary"]


def test_a_refresh_says_when_the_situation_changed_under_the_open_runbook(console, viewer, policy, clock):
    event = new_event(clock.now())
    url = reverse("runbook:event", args=[event.id])
    client = console(viewer)
    same = client.get(url, {"shown": "on-track"}, HTTP_HX_REQUEST="true").content.decode()
    assert "reload for its runbook" not in same
    clock.advance(30)
    changed = client.get(url, {"shown": "on-track"}, HTTP_HX_REQUEST="true").content.decode()
    assert "reload for its runbook" in changed


@pytest.mark.parametrize(
    ("state", "section"),
    [
        (State.SMS_PENDING, "Slow receipt, not a failure."),
        (State.SMS_FAILED, "The email fallback is allowed now"),
        (State.EMAIL_CLAIMED, "The email fallback is claimed"),
        (State.SMS_DELIVERED, "Nothing left to do"),
    ],
)
def test_the_runbook_panel_walks_through_the_current_situation(page, policy, clock, state, section):
    assert section in page(event_in(state, clock)).content.decode()


def test_the_runbook_panel_says_when_no_fallback_is_left(page, policy, clock):
    event = event_in(State.SMS_PENDING, clock, email="")
    assert "No fallback is left" in page(event).content.decode()


def test_without_a_worker_the_page_says_what_is_allowed_now_not_what_was_scheduled(page, policy, clock):
    event = event_in(State.SMS_PENDING, clock)
    clock.advance(61)  # past the fallback deadline; no worker has written since
    response = page(event)
    status = response.context["status"]
    assert status.schedule_is_stale
    assert status.allowed_transition.startswith("Claim the email fallback")
    body = response.content.decode()
    assert "the worker last scheduled “poll the SMS receipt”" in body


def test_past_expiry_the_one_transition_left_is_to_expire(page, policy, clock):
    event = event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    clock.advance(601)
    assert page(event).context["status"].allowed_transition.startswith("Expire")


def test_a_terminal_event_stops_the_polling(page, policy, clock):
    open_body = page(new_event(clock.now())).content.decode()
    assert 'hx-trigger="every 3s"' in open_body
    done_body = page(event_in(State.SMS_DELIVERED, clock)).content.decode()
    assert 'hx-trigger="every 3s"' not in done_body


def test_an_unknown_shown_situation_is_dropped(console, viewer, policy, clock):
    event = new_event(clock.now())
    url = reverse("runbook:event", args=[event.id])
    body = console(viewer).get(url, {"shown": '"><script>x</script>'}, HTTP_HX_REQUEST="true").content.decode()
    assert "?shown=on-track" in body
    assert "script" not in body


def test_every_situation_has_a_panel_and_a_section_in_the_written_runbook():
    from pathlib import Path

    from django.template.loader import render_to_string

    written = (Path(__file__).resolve().parents[2] / "docs" / "runbook.md").read_text()
    for situation in Situation:
        assert f"### {situation}" in written
        panel = render_to_string("runbook/runbook_panel.html", {"situation": situation.value, "event": None})
        assert panel.strip()
    # Each situation's panel is its own text, not the catch-all.
    panels = {render_to_string("runbook/runbook_panel.html", {"situation": s.value}) for s in Situation}
    assert len(panels) == len(Situation)
