"""SMS through the real ``twilio`` client: the raw->internal status map and error typing live here."""

from collections.abc import Mapping
from datetime import datetime, timedelta

import requests
from twilio.base.exceptions import TwilioRestException
from twilio.rest import Client
from twilio.rest.api.v2010.account.message import MessageInstance
from urllib3.exceptions import NewConnectionError

from notify.states import Normalized
from notify.transports.base import PermanentError, Receipt, SmsMessage, TransientError, UnknownOutcome

# Twilio message statuses (https://www.twilio.com/docs/messaging/api/message-resource#message-status-values).
# Anything else is kept raw and treated as pending: a new status word must not fail a delivery.
STATUS_MAP: Mapping[str, Normalized] = {
    "queued": Normalized.PENDING,
    "accepted": Normalized.PENDING,
    "scheduled": Normalized.PENDING,
    "sending": Normalized.PENDING,
    "sent": Normalized.PENDING,
    "delivered": Normalized.DELIVERED,
    "read": Normalized.DELIVERED,
    "undelivered": Normalized.TERMINAL_FAILURE,
    "failed": Normalized.TERMINAL_FAILURE,
    "canceled": Normalized.TERMINAL_FAILURE,
}

# How many of the destination's newest messages recovery reads. If all of them are
# newer than the submit, an older match could hide beyond: absence is then unproven.
LOOKUP_LIMIT = 50
# Twilio's dates have one-second resolution and its clock is not ours: look back well
# past the submit. Wider costs nothing, since the match is on the event's own link.
_DATE_SLACK = timedelta(minutes=5)


# Refusals about our account, not about the destination: 20003 authentication,
# 20429 too many requests, 30001 queue overflow.
_OUR_SIDE = frozenset({20003, 20429, 30001})


def normalize(raw_status: str) -> Normalized:
    return STATUS_MAP.get(raw_status, Normalized.PENDING)


class TwilioSms:
    """The SMS adapter. Every call is one HTTP request; none may run inside a DB transaction."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def submit(self, message: SmsMessage) -> Receipt:
        try:
            sent = self._client.messages.create(
                to=message.to, from_=message.sender, body=message.body, status_callback=message.status_callback
            )
        except TwilioRestException as error:
            raise _typed(error) from None
        except requests.RequestException as error:
            raise _unsent_or_unknown(error) from None
        receipt = _receipt(sent)
        # A create that answers with a terminal status was refused after all; anything else is accepted.
        if receipt.normalized == Normalized.TERMINAL_FAILURE:
            return receipt
        return Receipt(Normalized.ACCEPTED, receipt.raw_status, receipt.provider_ref, receipt.provider_time)

    def fetch(self, provider_ref: str) -> Receipt:
        try:
            return _receipt(self._client.messages(provider_ref).fetch())
        except (TwilioRestException, requests.RequestException) as error:
            # A failed poll proves nothing either way: poll again at the next interval.
            raise TransientError("poll_failed", type(error).__name__) from None

    def find(self, message: SmsMessage, since: datetime) -> Receipt | None:
        try:
            recent = self._client.messages.list(to=message.to, limit=LOOKUP_LIMIT)
        except (TwilioRestException, requests.RequestException) as error:
            raise UnknownOutcome("lookup_failed", type(error).__name__) from None
        window = [m for m in recent if m.date_created is None or m.date_created >= since - _DATE_SLACK]
        # Twilio takes no idempotency key: this event's message is the one to this destination,
        # since the submit, that carries the event's own link (a trial-account prefix or smart
        # encoding may change the rest of the body, never the link).
        reference = message.reference or message.body
        matches = [m for m in window if reference in (m.body or "")]
        if matches:
            return _receipt(matches[0])
        if len(recent) == LOOKUP_LIMIT and len(window) == len(recent):
            raise UnknownOutcome("lookup_incomplete", f"more than {LOOKUP_LIMIT} messages since the submit")
        return None


def _receipt(message: MessageInstance) -> Receipt:
    raw = message.status or ""
    return Receipt(normalize(raw), raw, message.sid or "", message.date_updated)


def _typed(error: TwilioRestException) -> Exception:
    raw = f"http_{error.status}" + (f"_{error.code}" if error.code else "")
    if error.status in (401, 429) or error.code in _OUR_SIDE:
        # Throttled, or our credentials are wrong: nothing was sent, and the recipient is not at fault.
        return TransientError(raw)
    if error.status >= 500:
        # Twilio may have created the message before failing: only a lookup can tell.
        return UnknownOutcome(raw)
    return PermanentError(raw)


def _unsent_or_unknown(error: requests.RequestException) -> Exception:
    reason = getattr(error.args[0], "reason", None) if error.args else None
    if isinstance(error, requests.ConnectTimeout) or isinstance(reason, NewConnectionError):
        # No connection was ever made: the request cannot have reached Twilio.
        return TransientError("connect_failed", type(error).__name__)
    return UnknownOutcome("no_response", type(error).__name__)
