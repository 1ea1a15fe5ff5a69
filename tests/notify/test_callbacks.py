"""The Twilio status callback: signed, deduplicated, redacted, applied through the transition table."""

import json
from datetime import timedelta

import pytest
import time_machine
from django.conf import settings
from twilio.request_validator import RequestValidator

from notify.messages import sms_callback_url
from notify.models import Claim, Event, Observation
from notify.rules.vocabulary import Channel, ClaimState, Effect, Normalized, State
from tests.factories import CANARY_PHONE, new_event
from tests.notify.helpers import SID, claim, drive_to, post_status, submit


@pytest.fixture(autouse=True)
def frozen_time(clock):
    # The view reads the system clock; pin it to the events' own timeline.
    with time_machine.travel(clock.now(), tick=False):
        yield


@pytest.fixture
def submitted(policy, clock):
    event = new_event(clock.now())
    submit(event.id, Channel.SMS, clock.now())
    return event


def test_a_signed_delivery_receipt_moves_the_event_along_the_table(client, submitted):
    assert post_status(client, submitted.id, "sent").status_code == 204
    assert post_status(client, submitted.id, "delivered").status_code == 204

    event = Event.objects.get(pk=submitted.id)
    assert event.state == State.SMS_DELIVERED
    assert Claim.objects.get(event=event, channel=Channel.SMS).state == ClaimState.DELIVERED
    assert Claim.objects.get(event=event, channel=Channel.SMS).provider_ref == SID


@pytest.mark.parametrize("signature", ["", "bm90LXRoZS1yaWdodC1zaWduYXR1cmU="])
def test_a_callback_without_a_valid_signature_is_refused_and_records_nothing(client, submitted, signature):
    response = post_status(client, submitted.id, "delivered", signature=signature)

    assert response.status_code == 403
    assert not Observation.objects.filter(event=submitted).exists()
    assert Event.objects.get(pk=submitted.id).state == State.SMS_REQUESTED


def test_a_signature_for_another_event_is_refused(client, policy, clock, submitted):
    other = new_event(clock.now())
    params = {"MessageSid": SID, "MessageStatus": "delivered"}
    signature = RequestValidator(settings.TWILIO_AUTH_TOKEN).compute_signature(sms_callback_url(other.id), params)

    response = client.post(f"/callbacks/twilio/sms/{submitted.id}", params, headers={"X-Twilio-Signature": signature})

    assert response.status_code == 403


def test_a_retried_callback_is_stored_once(client, submitted):
    for _ in range(3):
        assert post_status(client, submitted.id, "sent").status_code == 204

    assert Observation.objects.filter(event=submitted, raw_status="sent").count() == 1


def test_the_stored_payload_keeps_status_fields_only(client, submitted):
    post_status(client, submitted.id, "undelivered", extra={"ErrorCode": "30003"})

    stored = Observation.objects.get(event=submitted)
    payload = json.loads(stored.raw_payload)
    assert payload["ErrorCode"] == "30003"
    assert payload["MessageStatus"] == "undelivered"
    assert not {"To", "From", "Body"} & payload.keys()
    assert CANARY_PHONE not in stored.raw_payload
    assert "reset" not in stored.raw_payload


def test_an_unknown_status_is_kept_raw_and_treated_as_pending(client, submitted):
    post_status(client, submitted.id, "partially_delivered")

    stored = Observation.objects.get(event=submitted)
    assert (stored.raw_status, stored.normalized) == ("partially_delivered", Normalized.PENDING)
    assert Event.objects.get(pk=submitted.id).state == State.SMS_PENDING


def test_a_late_delivery_after_the_fallback_claim_changes_no_state(client, policy, clock):
    event = drive_to(new_event(clock.now()), State.SMS_PENDING, clock.now())
    assert claim(event.id, event.created_at + policy.sms_budget).applied

    assert post_status(client, event.id, "delivered").status_code == 204

    assert Event.objects.get(pk=event.id).state == State.EMAIL_CLAIMED
    late = Observation.objects.get(event=event, raw_status="delivered")
    assert late.effect == Effect.LATE
    assert Claim.objects.get(event=event, channel=Channel.SMS).state == ClaimState.DELIVERED


def test_a_terminal_failure_wakes_the_worker_to_claim_the_fallback_now(
    client, submitted, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as wakeups:
        post_status(client, submitted.id, "failed", extra={"ErrorCode": "30008"})

    assert Event.objects.get(pk=submitted.id).state == State.SMS_FAILED
    assert len(wakeups) == 1


def test_a_pending_receipt_wakes_nobody(client, submitted, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as wakeups:
        post_status(client, submitted.id, "sent")

    assert wakeups == []


def test_a_delivery_past_the_fallback_deadline_that_proves_the_acceptance_too_wakes_nobody(
    client, policy, clock, submitted, django_capture_on_commit_callbacks
):
    # Past D with the submit's answer still awaited: the implied acceptance alone would leave the
    # fallback's claim due now, but the delivery written right after ends the event, so no worker
    # is woken to claim it between the two writes.
    with (
        time_machine.travel(clock.now() + policy.sms_budget + timedelta(seconds=1), tick=False),
        django_capture_on_commit_callbacks(execute=False) as wakeups,
    ):
        post_status(client, submitted.id, "delivered")

    assert Event.objects.get(pk=submitted.id).state == State.SMS_DELIVERED
    assert wakeups == []


def test_a_callback_for_an_unknown_event_is_not_found(client, policy):
    assert post_status(client, "evt_01ARZ3NDEKTSV4RRFFQ69G5FAV", "sent").status_code == 404


def test_a_callback_without_message_sid_or_status_is_a_bad_request(client, submitted):
    response = post_status(client, submitted.id, "", extra={"SmsStatus": ""})

    assert response.status_code == 400


def test_only_post_is_allowed(client, submitted):
    assert client.get(f"/callbacks/twilio/sms/{submitted.id}").status_code == 405


def test_a_delivery_receipt_that_beats_the_submit_answer_proves_the_acceptance_too(client, submitted):
    assert post_status(client, submitted.id, "delivered").status_code == 204

    event = Event.objects.get(pk=submitted.id)
    assert event.state == State.SMS_DELIVERED
    assert Claim.objects.get(event=event, channel=Channel.SMS).state == ClaimState.DELIVERED
    recorded = list(Observation.objects.filter(event=event).order_by("id").values_list("normalized", "effect"))
    assert recorded == [(Normalized.ACCEPTED, Effect.APPLIED), (Normalized.DELIVERED, Effect.APPLIED)]


def test_each_callback_is_logged_with_what_it_did_in_the_shared_vocabulary(client, policy, clock, caplog):
    event = drive_to(new_event(clock.now()), State.SMS_PENDING, clock.now())
    post_status(client, event.id, "sent")  # the normal case while pending: evidence kept, no error
    post_status(client, event.id, "sent")  # the same report again
    assert claim(event.id, event.created_at + policy.sms_budget).applied
    post_status(client, event.id, "delivered")  # after the fallback took over
    outcomes = [record.result for record in caplog.records if record.getMessage() == "callback"]
    assert outcomes == [Effect.RECORDED, "duplicate", Effect.LATE]
    effects = Observation.objects.filter(event=event, raw_status__in=["sent", "delivered"]).order_by("id")
    assert list(effects.values_list("effect", flat=True)) == [Effect.RECORDED, Effect.LATE]
