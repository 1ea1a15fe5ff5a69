"""The event page answers, at a glance: who owns it, what was last seen, the action budget, the one next step."""

import itertools
from datetime import timedelta

import pytest
from django.urls import reverse

from notify.models import Claim
from notify.rules import plan
from notify.rules.plan import ObservationInput
from notify.rules.vocabulary import Channel, ClaimState, Normalized, Source, State
from notify.writes import leases, moves
from runbook.console import timeline as timeline_module
from runbook.console.answers import Situation
from tests.conftest import T0
from tests.factories import PolicyVersionFactory, new_event
from tests.runbook.events import WORKER, event_in, observe, record, sms_submitting


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


def test_a_claim_at_its_outcome_shows_no_next_attempt(page, policy, clock):
    event = event_in(State.SMS_DELIVERED, clock)
    # Delivered, with the next attempt its last attempt had scheduled still on it.
    Claim.objects.filter(event=event).update(state=ClaimState.DELIVERED, next_attempt_at=clock.now())

    body = page(event).content.decode()

    assert 'data-next-attempt="sms">—<' in body


def test_it_shows_the_locale_the_time_zone_and_the_set_the_messages_are_rendered_in(page, clock):
    german_set = {"sms": "{{ reset_url }}", "email_subject": "Link", "email_body": "."}
    PolicyVersionFactory(locale_templates={"de": german_set})
    german = new_event(clock.now(), locale="de-AT", time_zone="Europe/Vienna")
    anyone = new_event(clock.now())

    assert 'data-language>rendered in: de <span class="muted">(locale de-AT, time zone Europe/Vienna)' in (
        page(german).content.decode()
    )
    assert 'rendered in: en (default) <span class="muted">(locale not given, time zone not given: UTC)' in (
        page(anyone).content.decode()
    )


def test_a_live_lease_names_its_holder_and_expiry(page, policy, clock):
    event = new_event(clock.now())
    leases.take(event.id, WORKER, at=clock.now(), ttl=timedelta(seconds=30))
    status = page(event).context["status"]
    assert status.owner.live
    assert status.owner.holder == WORKER
    assert status.owner.expires_at == clock.now() + timedelta(seconds=30)


def test_an_expired_lease_reads_as_unowned_and_says_why(page, policy, clock):
    event = new_event(clock.now())
    leases.take(event.id, WORKER, at=clock.now(), ttl=timedelta(seconds=30))
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
    note = plan.ObservationInput(channel=Channel.SMS, source=Source.OPERATOR, normalized=Normalized.NOTE, note="x")
    moves.record_observation(event.id, note, now=clock.now(), actor="operator:rita")
    last = page(event).context["status"].last_observation
    assert (last.normalized, last.recorded_at) == (Normalized.PENDING, clock.now() - timedelta(seconds=5))


def test_state_age_and_action_budget_are_two_separate_values(page, policy, clock):
    event = event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    clock.advance(40)
    status = page(event).context["status"]
    assert status.timing.state_age == timedelta(seconds=40)
    # act_by = expiry - (poll 2 + select 1 + email submit 5 + record 1)
    assert status.timing.action_budget == timedelta(seconds=600 - 9 - 40)


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
    wide, narrow = response.context["timelines"]
    for timeline in (wide, narrow):
        assert [mark.kind for mark in timeline.marks] == ["now", "deadline", "act-by", "expiry"]
        assert {point.kind for point in timeline.points} >= {"created", "transition", "obs-accepted"}
    # The phone's own layout: laid out on its own canvas (not the wide one scaled down), every
    # point inside it and no two labels on one row overlapping at their own size.
    assert (wide.width, narrow.width) == (960, 360)
    assert all(narrow.left <= point.x <= narrow.right for point in narrow.points)
    rows: dict[float, list[tuple[float, float]]] = {}
    for mark in narrow.marks:
        half = len(mark.label) * timeline_module.CHAR_WIDTH / 2
        rows.setdefault(mark.label_y, []).append((mark.x - half, mark.x + half))
    for spans in rows.values():
        spans.sort()
        assert all(left[1] <= right[0] for left, right in itertools.pairwise(spans)), spans
    body = response.content.decode()
    assert '<svg class="timeline wide"' in body
    assert '<svg class="timeline narrow"' in body
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


# What the worker and the adapters record for the outcomes that are more than their normalized
# status, built as they build them (the worker's own words are the console's keys).
LOST_MID_SEND = ObservationInput(Channel.EMAIL, Source.RECOVERY, Normalized.POSSIBLE_DUPLICATE, "holder_lost")
SMS_REFUSED = ObservationInput(Channel.SMS, Source.SUBMIT, Normalized.CONFIGURATION_ERROR, "http_401_20003")
EMAIL_REFUSED = ObservationInput(Channel.EMAIL, Source.SUBMIT, Normalized.CONFIGURATION_ERROR, "smtp_535")
NOT_LISTED_YET = plan.not_listed(
    T0, T0, T0, proof_after=timedelta(seconds=70), first_wait=timedelta(seconds=2), longest_wait=timedelta(seconds=10)
)
LOOKUP_AMBIGUOUS = ObservationInput(Channel.SMS, Source.RECOVERY, Normalized.UNKNOWN_OUTCOME, "lookup_ambiguous")
LOOKUP_REDACTED = ObservationInput(Channel.SMS, Source.RECOVERY, Normalized.UNKNOWN_OUTCOME, "lookup_redacted")
EMAIL_UNKNOWN = ObservationInput(Channel.EMAIL, Source.SUBMIT, Normalized.UNKNOWN_OUTCOME, "connection_lost")
SMS_UNKNOWN = ObservationInput(Channel.SMS, Source.SUBMIT, Normalized.UNKNOWN_OUTCOME, "http_503")


def with_outcome(observation: ObservationInput, clock):
    """An event whose channel was being sent when ``observation`` came (an email claimed, an SMS submitting)."""
    event = event_in(State.EMAIL_CLAIMED, clock) if observation.channel == Channel.EMAIL else sms_submitting(clock)
    record(event.id, observation, clock.now())
    return event


@pytest.mark.parametrize(
    ("observation", "kind", "label"),
    [
        (LOST_MID_SEND, "possible_duplicate", "possible duplicate"),
        (SMS_REFUSED, "configuration_error", "provider refuses our credentials"),
        (EMAIL_REFUSED, "configuration_error", "provider refuses our credentials"),
        (plan.NO_USEFUL_LIFE, "no_useful_life", "fallback without useful life (not sent)"),
        (NOT_LISTED_YET, "not_listed_yet", "unresolved: not listed yet"),
        (LOOKUP_AMBIGUOUS, "lookup_ambiguous", "unresolved: lookup ambiguous"),
        (LOOKUP_REDACTED, "lookup_redacted", "unresolved: absence unprovable"),
    ],
    ids=["lost_mid_send", "sms_refused", "email_refused", "no_useful_life", "not_listed_yet", "ambiguous", "redacted"],
)
def test_an_outcome_kind_is_named_alike_in_the_last_observation_the_claims_and_the_history(
    page, policy, clock, observation, kind, label
):
    body = page(with_outcome(observation, clock)).content.decode()
    channel = observation.channel
    assert f'data-last-observation="{kind}">{channel} {label}</p>' in body
    assert f'data-claim-outcome="{channel}">{label}' in body
    assert f'<td data-outcome="{kind}"' in body


def test_a_lost_email_send_says_the_resend_may_be_a_second_copy(page, policy, clock):
    response = page(with_outcome(LOST_MID_SEND, clock))
    assert "The worker sending this email was lost mid-send; the resend may be a second copy" in (
        response.content.decode()
    )
    assert response.context["status"].situation == Situation.POSSIBLE_DUPLICATE_EMAIL


def test_a_fallback_without_useful_life_ends_the_event_unsent_not_as_a_failed_send(page, policy, clock):
    response = page(with_outcome(plan.NO_USEFUL_LIFE, clock))
    body = response.content.decode()
    assert response.context["event"].state == State.EMAIL_FAILED
    assert 'data-claim="email">failed<' in body
    assert "email fallback without useful life (not sent)" in body
    assert "terminal failure" not in body


def test_an_unresolved_sms_is_not_resent_and_yields_to_the_email_at_the_fallback_deadline(page, policy, clock):
    body = page(with_outcome(NOT_LISTED_YET, clock)).content.decode()
    assert 'data-claim="sms">submitting<' in body
    assert "absence provable from 2026-01-01T12:01:10+00:00" in body
    assert "The SMS stays unresolved and is not resent unless a lookup proves it absent" in body
    assert "if it is still unresolved at the fallback deadline D, the email fallback (if any) goes instead" in body


def test_an_sms_whose_absence_cannot_be_proven_is_never_resent(page, policy, clock):
    body = page(with_outcome(LOOKUP_REDACTED, clock)).content.decode()
    assert "no lookup can prove the SMS absent: it is not resent" in body


@pytest.mark.parametrize(
    ("observation", "meaning"),
    [
        (SMS_UNKNOWN, "The provider may have the SMS, so only a lookup can settle it."),
        (
            EMAIL_UNKNOWN,
            "recorded before any resend, it is resent under the same Message-ID as the policy allows, "
            "so a second copy is possible.",
        ),
    ],
    ids=["sms", "email"],
)
def test_an_unknown_outcome_says_how_its_channel_settles_it(page, policy, clock, observation, meaning):
    assert meaning in page(with_outcome(observation, clock)).content.decode()


@pytest.mark.parametrize("observation", [SMS_REFUSED, EMAIL_REFUSED], ids=["sms", "email"])
def test_refused_credentials_say_nothing_was_sent_and_open_their_runbook(page, policy, clock, observation):
    response = page(with_outcome(observation, clock))
    body = response.content.decode()
    assert "The provider refused our account or credentials: nothing was sent" in body
    assert response.context["status"].situation == Situation.PROVIDER_REFUSES_CREDENTIALS
    assert "The provider refuses our credentials or account" in body  # the runbook panel


def test_a_provider_raw_status_never_becomes_wording(page, policy, clock):
    body = page(with_outcome(SMS_REFUSED, clock)).content.decode()
    assert "20003" not in body
    assert "http_401" not in body


def test_the_stuck_worker_runbook_says_how_each_channel_is_settled_after_a_takeover(page, policy, clock):
    event = new_event(clock.now())
    leases.take(event.id, WORKER, at=clock.now(), ttl=timedelta(seconds=30))
    clock.advance(31)
    body = page(event).content.decode()
    assert "An SMS is looked up at the provider first and sent again only if provably absent." in body
    assert (
        "An email cannot be looked up (SMTP has no lookup): the worker taking over records a "
        "<b>possible duplicate</b>, then resends it under the same Message-ID as the policy allows."
    ) in body


@pytest.mark.parametrize("path", ["/events/%00", "/events/%00/raw"])
def test_a_page_for_an_id_with_a_nul_byte_is_not_found(console, raw_viewer, policy, path):
    # PostgreSQL refuses a NUL in text: looked up, it made a 500 of the page.
    assert console(raw_viewer).get(path).status_code == 404
