"""Runbook actions: through the same CAS as the worker, the responder as actor, audited, race-aware."""

from datetime import timedelta

import pytest
from django.urls import reverse

from notify.models import Claim, Event, Observation, Transition
from notify.rules import plan
from notify.rules.vocabulary import Cause, Channel, Normalized, Source, State
from notify.writes import leases, moves
from runbook.models import AuditAction, AuditEntry
from tests.concurrency import race
from tests.factories import CANARY_PHONE, new_event
from tests.runbook.events import WORKER, event_in


def _post(client, name, event, data):
    return client.post(reverse(name, args=[event.id]), data, follow=True)


def _messages(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


@pytest.fixture
def acting(console, responder):
    return console(responder)


@pytest.fixture
def abandoned(policy, clock):
    """An event whose worker took the lease and died: the lease has run out."""
    event = new_event(clock.now())
    lease = leases.take(event.id, WORKER, at=clock.now(), ttl=timedelta(seconds=30))
    clock.advance(31)
    event.refresh_from_db()
    assert lease is not None
    return event


# Release an expired lease


def test_releasing_an_expired_lease_frees_and_fences_it_and_wakes_a_worker(
    acting, responder, abandoned, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as wakeups:
        response = _post(acting, "runbook:release-lease", abandoned, {"lease_token": abandoned.lease_token})
    assert _messages(response) == ["Lease released; a worker has been woken to take the event."]
    event = Event.objects.get(pk=abandoned.id)
    assert (event.lease_owner, event.lease_expires_at) == ("", None)
    assert event.lease_token == abandoned.lease_token + 1  # the dead holder can no longer write
    assert len(wakeups) == 1
    note = Observation.objects.get(event=event, source=Source.OPERATOR)
    assert (note.normalized, note.actor) == (Normalized.NOTE, "operator:rita")
    assert note.note == f"released the expired lease of {WORKER}"
    entry = AuditEntry.objects.get()
    assert (entry.user, entry.action, entry.applied) == (responder, AuditAction.RELEASE_LEASE, True)


def test_a_live_lease_is_not_released(acting, policy, clock):
    event = new_event(clock.now())
    leases.take(event.id, WORKER, at=clock.now(), ttl=timedelta(seconds=30))
    event.refresh_from_db()
    response = _post(acting, "runbook:release-lease", event, {"lease_token": event.lease_token})
    assert _messages(response)[0].startswith("Not released")
    assert Event.objects.get(pk=event.id).lease_owner == WORKER
    assert not AuditEntry.objects.get().applied


def test_a_lease_taken_over_since_the_page_was_loaded_is_not_released(acting, abandoned, clock):
    seen_token = abandoned.lease_token
    # Another worker took the expired lease over, then it expired too (its token differs from the one seen).
    leases.take(abandoned.id, "worker:host-2:7", at=clock.now(), ttl=timedelta(seconds=1))
    clock.advance(2)
    response = _post(acting, "runbook:release-lease", abandoned, {"lease_token": seen_token})
    assert _messages(response)[0].startswith("Not released: since you loaded the page")
    assert Event.objects.get(pk=abandoned.id).lease_owner == "worker:host-2:7"
    assert AuditEntry.objects.get().detail == "the lease was renewed, taken over or already released"


def test_the_release_button_is_shown_only_for_an_expired_lease(acting, abandoned, policy, clock):
    release = reverse("runbook:release-lease", args=[abandoned.id])
    assert release in acting.get(reverse("runbook:event", args=[abandoned.id])).content.decode()
    live = new_event(clock.now())
    leases.take(live.id, WORKER, at=clock.now(), ttl=timedelta(seconds=30))
    page = acting.get(reverse("runbook:event", args=[live.id])).content.decode()
    assert reverse("runbook:release-lease", args=[live.id]) not in page


# Claim the email fallback now


def test_claiming_the_fallback_moves_the_event_as_an_operator_transition(
    acting, responder, policy, clock, django_capture_on_commit_callbacks
):
    event = event_in(State.SMS_FAILED, clock)
    with django_capture_on_commit_callbacks(execute=False) as wakeups:
        response = _post(acting, "runbook:claim-fallback", event, {"version": event.version})
    assert _messages(response) == ["Email fallback claimed; a worker is submitting it now."]
    assert Event.objects.get(pk=event.id).state == State.EMAIL_CLAIMED
    transition = Transition.objects.get(event=event, to_state=State.EMAIL_CLAIMED)
    assert (transition.cause, transition.actor) == (Cause.OPERATOR, "operator:rita")
    assert Claim.objects.filter(event=event, channel=Channel.EMAIL).count() == 1
    assert len(wakeups) == 1
    assert AuditEntry.objects.get().applied


def test_a_claim_decided_on_a_stale_page_is_refused(acting, policy, clock):
    event = event_in(State.SMS_PENDING, clock)
    seen = event.version
    clock.advance(61)  # past the fallback deadline: the claim would be allowed...
    # ...but a receipt arrived after the responder loaded the page.
    moves.record_observation(
        event.id,
        plan.ObservationInput(Channel.SMS, Source.CALLBACK, Normalized.TERMINAL_FAILURE),
        now=clock.now(),
        actor=WORKER,
    )
    response = _post(acting, "runbook:claim-fallback", event, {"version": seen})
    assert _messages(response) == [
        "Not claimed: the event changed since you loaded the page (it is now sms_failed); "
        "review it and decide again. Nothing was changed."
    ]
    assert not Claim.objects.filter(event=event, channel=Channel.EMAIL).exists()
    assert not AuditEntry.objects.get().applied


def test_a_claim_the_table_does_not_allow_is_refused(acting, policy, clock):
    event = event_in(State.SMS_PENDING, clock)  # before the fallback deadline
    response = _post(acting, "runbook:claim-fallback", event, {"version": event.version})
    assert _messages(response)[0].startswith("Not claimed: the transition table does not allow the fallback")
    assert Event.objects.get(pk=event.id).state == State.SMS_PENDING


def test_when_the_worker_claimed_first_the_responder_is_told(acting, policy, clock):
    event = event_in(State.SMS_FAILED, clock)
    moves.claim_email_fallback(event.id, now=clock.now(), actor=WORKER, cause=Cause.OBSERVATION)
    response = _post(acting, "runbook:claim-fallback", event, {"version": event.version})
    assert "it is now email_claimed" in _messages(response)[0]
    assert Claim.objects.filter(event=event, channel=Channel.EMAIL).count() == 1


def test_the_claim_button_is_shown_only_when_the_table_allows_it(acting, console, viewer, policy, clock):
    pending = event_in(State.SMS_PENDING, clock)
    failed = event_in(State.SMS_FAILED, clock)
    claim = "Claim the email fallback now"
    assert claim not in acting.get(reverse("runbook:event", args=[pending.id])).content.decode()
    assert claim in acting.get(reverse("runbook:event", args=[failed.id])).content.decode()
    assert claim not in console(viewer).get(reverse("runbook:event", args=[failed.id])).content.decode()


def test_an_incomplete_form_changes_nothing(acting, policy, clock):
    event = event_in(State.SMS_FAILED, clock)
    response = _post(acting, "runbook:claim-fallback", event, {"version": "x"})
    assert _messages(response) == ["The claim form was incomplete; reload the page and try again."]
    assert Event.objects.get(pk=event.id).state == State.SMS_FAILED


# Follow-up notes


def test_a_follow_up_note_is_an_operator_observation_that_does_not_delay_polling(acting, responder, policy, clock):
    event = event_in(State.SMS_PENDING, clock)
    before = Event.objects.get(pk=event.id)
    clock.advance(5)
    response = _post(acting, "runbook:follow-up", event, {"note": "carrier incident, check tomorrow"})
    assert _messages(response) == ["Marked for follow-up."]
    note = Observation.objects.get(event=event, source=Source.OPERATOR)
    assert (note.normalized, note.actor, note.note) == (
        Normalized.NOTE,
        "operator:rita",
        "carrier incident, check tomorrow",
    )
    after = Event.objects.get(pk=event.id)
    assert (after.state, after.version) == (before.state, before.version)
    assert after.last_observation_at == before.last_observation_at
    assert after.next_action_at == before.next_action_at
    assert AuditEntry.objects.get().action == AuditAction.FOLLOW_UP
    listed = acting.get(reverse("runbook:events")).content.decode()
    assert '<span class="badge note">follow-up</span>' in listed


def test_an_ended_event_marked_for_follow_up_is_on_the_follow_up_list(acting, policy, clock):
    ended = event_in(State.SMS_DELIVERED, clock)
    quiet = event_in(State.SMS_DELIVERED, clock)
    _post(acting, "runbook:follow-up", ended, {"note": "subscriber called support"})
    # Releasing a lease also leaves an operator note, but marks nothing for follow-up.
    leases.take(quiet.id, WORKER, at=clock.now(), ttl=timedelta(seconds=1))
    clock.advance(2)
    quiet.refresh_from_db()
    _post(acting, "runbook:release-lease", quiet, {"lease_token": quiet.lease_token})
    marks = acting.get(reverse("runbook:follow-ups")).context["marks"]
    assert [(mark.event_id, mark.detail, state) for mark, state in marks] == [
        (ended.id, "subscriber called support", State.SMS_DELIVERED)
    ]


@pytest.mark.parametrize(
    "note",
    [f"subscriber says {CANARY_PHONE} is wrong", "call 415 555 0123", "wrote to a.b@example.org", "see https://x.io/r"],
)
def test_a_note_with_personal_data_is_refused_and_nothing_is_kept(acting, policy, clock, note):
    event = new_event(clock.now())
    response = _post(acting, "runbook:follow-up", event, {"note": note})
    assert _messages(response) == [
        "Note not saved: Notes must not contain a phone number, an email address or a link. "
        "Refer to the event by its id."
    ]
    assert not Observation.objects.filter(event=event).exists()
    assert not AuditEntry.objects.exists()
    assert note not in response.content.decode()  # not echoed back either


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_responder_and_workers_racing_to_claim_the_fallback_make_one_claim(console, responder, policy, clock):
    event = event_in(State.SMS_FAILED, clock)
    client = console(responder)

    def claim(i):
        if i == 0:
            response = client.post(reverse("runbook:claim-fallback", args=[event.id]), {"version": event.version})
            return response.status_code == 302 and AuditEntry.objects.get().applied
        outcome = moves.claim_email_fallback(event.id, now=clock.now(), actor=f"worker-{i}", cause=Cause.OBSERVATION)
        return outcome.applied

    results = race(claim)
    assert sum(results) == 1
    assert Claim.objects.filter(event=event, channel=Channel.EMAIL).count() == 1
    assert Transition.objects.filter(event=event, to_state=State.EMAIL_CLAIMED).count() == 1


@pytest.mark.parametrize("action", ["release-lease", "claim-fallback", "follow-up"])
def test_an_action_on_an_id_with_a_nul_byte_is_not_found(acting, policy, action):
    # PostgreSQL refuses a NUL in text: looked up, it made a 500 of the action.
    assert acting.post(f"/events/%00/{action}", {"note": "checked"}).status_code == 404
