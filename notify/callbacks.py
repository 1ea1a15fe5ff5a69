"""Provider callbacks: Twilio's SMS status webhook.

Verified with the twilio library's signature validator (403, nothing recorded,
on a bad or missing signature), redacted to an allowlist of status fields,
deduplicated per (message, status), and applied through the same transition
as every other observation (``notify.writes.moves``). It answers in two statements or so.
"""

import json
import logging
import time

from django.conf import settings
from django.db import IntegrityError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from twilio.request_validator import HMAC_SHA256, RequestValidator, get_signature_algorithm

from notify.messages import sms_callback_url
from notify.rules.plan import ObservationInput
from notify.rules.vocabulary import Channel, Source
from notify.transports.twilio_sms import normalize
from notify.writes import moves
from plumbing.clock import current_clock

log = logging.getLogger("notify.callbacks")

ACTOR = "twilio-callback"
# Only these fields of the payload are kept; To, From, Body and anything new are dropped.
KEPT_FIELDS = ("MessageSid", "SmsSid", "MessageStatus", "SmsStatus", "ErrorCode", "AccountSid", "ApiVersion")


@csrf_exempt  # Not a browser form: authenticity comes from the provider's signature.
@require_POST
def sms_status_callback(request: HttpRequest, event_id: str) -> HttpResponse:
    started = time.monotonic()
    if not _signed_by_twilio(request, event_id):
        log.warning("callback_refused", extra={"event_id": event_id, "reason": "bad_signature"})
        return HttpResponse("invalid signature", status=403, content_type="text/plain")
    params = {key: request.POST[key] for key in request.POST}
    sid = params.get("MessageSid") or params.get("SmsSid", "")
    status = params.get("MessageStatus") or params.get("SmsStatus", "")
    if not sid or not status:
        return HttpResponse("MessageSid and MessageStatus are required", status=400, content_type="text/plain")
    # A retried report (the same message and status) is refused by the observation's unique
    # (event, dedup_key) inside the transition's own write: no lookup before it for the
    # common case, a first report, to pay for.
    dedup_key = f"{sid}:{status}"[:100]
    observation = ObservationInput(
        Channel.SMS,
        Source.CALLBACK,
        normalize(status),
        raw_status=status[:64],
        provider_ref=sid[:64],
        raw_payload=json.dumps({key: params[key] for key in KEPT_FIELDS if key in params}, sort_keys=True),
        dedup_key=dedup_key,
    )
    try:
        # A terminal failure reported here wakes the event itself (the write sends it): the
        # fallback may be claimed now, not at the next poll.
        written = moves.record_receipt(event_id, observation, now=current_clock().now(), actor=ACTOR)
    except IntegrityError:
        # The same report again, or racing itself: the other copy was stored, this one wrote nothing.
        return _answer(event_id, status, "duplicate", started)
    except LookupError:
        return HttpResponse("no such event", status=404, content_type="text/plain")
    after = written.after
    return _answer(event_id, status, written.effect.value, started, state=after.event.state, version=after.version)


def _signed_by_twilio(request: HttpRequest, event_id: str) -> bool:
    """Check ``X-Twilio-Signature`` over the URL we gave Twilio and every posted value.

    The URL is ours, not the one a proxy in front of us reports. Accounts that sign
    webhooks with a shared key (HMAC-SHA256, named in the signature-settings header)
    are checked with that key; the default is HMAC-SHA1 with the auth token.
    """
    signature = request.headers.get("X-Twilio-Signature", "")
    if not signature:
        return False
    algorithm = get_signature_algorithm(request.headers.get("X-Twilio-Webhooks-Signature-Settings"))
    key = settings.TWILIO_AUTH_TOKEN
    if algorithm.upper() == HMAC_SHA256:
        if not settings.TWILIO_WEBHOOK_SIGNING_KEY:
            return False
        key = settings.TWILIO_WEBHOOK_SIGNING_KEY
    # The QueryDict itself: the validator signs every value of a repeated field.
    return bool(
        RequestValidator(key).validate(sms_callback_url(event_id), request.POST, signature, algorithm=algorithm)
    )


def _answer(event_id: str, status: str, result: str, started: float, **fields: object) -> HttpResponse:
    log.info(
        "callback",
        extra={
            "event_id": event_id,
            "raw_status": status,
            "result": result,
            "duration_ms": round((time.monotonic() - started) * 1000, 1),
            **fields,
        },
    )
    return HttpResponse(status=204)
