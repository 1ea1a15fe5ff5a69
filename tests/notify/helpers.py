"""Drive events through the real transition functions, as the worker and callbacks do."""

from datetime import timedelta

from django.conf import settings
from twilio.request_validator import RequestValidator

from notify.messages import sms_callback_url
from notify.models import Event
from notify.rules.plan import ObservationInput
from notify.rules.vocabulary import Cause, Channel, Normalized, Source, State
from notify.writes import intent, leases, moves
from tests.factories import CANARY_PHONE


def observe(event_id, channel, normalized, now, *, source=Source.CALLBACK, lease=None, actor="test"):
    observation = ObservationInput(channel=channel, source=source, normalized=Normalized(normalized))
    return moves.record_observation(event_id, observation, now=now, actor=actor, lease=lease)


def claim(event_id, now, *, lease=None, actor="test", cause=Cause.DEADLINE):
    return moves.claim_email_fallback(event_id, now=now, actor=actor, cause=cause, lease=lease)


# The operation that asks for each target state (sms_requested has none: it is only entered at creation).
OPERATIONS = {
    State.SMS_PENDING: lambda event_id, now: observe(event_id, Channel.SMS, Normalized.ACCEPTED, now),
    State.SMS_DELIVERED: lambda event_id, now: observe(event_id, Channel.SMS, Normalized.DELIVERED, now),
    State.SMS_FAILED: lambda event_id, now: observe(event_id, Channel.SMS, Normalized.TERMINAL_FAILURE, now),
    State.EMAIL_CLAIMED: lambda event_id, now: claim(event_id, now),
    State.EMAIL_ACCEPTED: lambda event_id, now: observe(event_id, Channel.EMAIL, Normalized.ACCEPTED, now),
    State.EMAIL_FAILED: lambda event_id, now: observe(event_id, Channel.EMAIL, Normalized.TERMINAL_FAILURE, now),
    State.EXPIRED: lambda event_id, now: moves.expire(event_id, now=now, actor="test"),
}

# A path from sms_requested to each state, through allowed transitions only.
PATHS = {
    State.SMS_REQUESTED: [],
    State.SMS_PENDING: [State.SMS_PENDING],
    State.SMS_DELIVERED: [State.SMS_PENDING, State.SMS_DELIVERED],
    State.SMS_FAILED: [State.SMS_FAILED],
    State.EMAIL_CLAIMED: [State.SMS_FAILED, State.EMAIL_CLAIMED],
    State.EMAIL_ACCEPTED: [State.SMS_FAILED, State.EMAIL_CLAIMED, State.EMAIL_ACCEPTED],
    State.EMAIL_FAILED: [State.SMS_FAILED, State.EMAIL_CLAIMED, State.EMAIL_FAILED],
    State.EXPIRED: [State.EXPIRED],
}


def submit(event_id, channel, now):
    """Do what a worker does before calling a provider: hold the lease, record the intent."""
    lease = leases.take(event_id, "test-worker", at=now, ttl=timedelta(seconds=30))
    assert lease is not None, "event is leased by someone else"
    assert intent.begin_submit(event_id, channel, now=now, at=now, lease=lease)
    leases.give_back(event_id, lease)


SUBMITTED_BEFORE = {
    State.SMS_PENDING: Channel.SMS,
    State.EMAIL_ACCEPTED: Channel.EMAIL,
    State.EMAIL_FAILED: Channel.EMAIL,
}


def drive_to(event, state, now):
    """Move a fresh event to ``state`` along ``PATHS``, failing loudly if any step is refused."""
    for step in PATHS[state]:
        if step in SUBMITTED_BEFORE:
            submit(event.id, SUBMITTED_BEFORE[step], now)
        when = event.expires_at if step == State.EXPIRED else now
        assert OPERATIONS[step](event.id, when).applied, f"could not reach {step}"
    return Event.objects.get(pk=event.id)


def seconds(n):
    return timedelta(seconds=n)


SID = "SM" + "a" * 32


def post_status(client, event_id, status, *, sid=SID, signature=None, extra=None):
    params = {
        "MessageSid": sid,
        "SmsSid": sid,
        "MessageStatus": status,
        "SmsStatus": status,
        "AccountSid": settings.TWILIO_ACCOUNT_SID,
        "To": CANARY_PHONE,
        "From": "+15005550006",
        "Body": "Reset: https://accounts.example.org/reset/canary-token-7f3a",
        "ApiVersion": "2010-04-01",
        **(extra or {}),
    }
    if signature is None:
        signature = RequestValidator(settings.TWILIO_AUTH_TOKEN).compute_signature(sms_callback_url(event_id), params)
    headers = {"X-Twilio-Signature": signature} if signature else {}
    return client.post(f"/callbacks/twilio/sms/{event_id}", params, headers=headers)
