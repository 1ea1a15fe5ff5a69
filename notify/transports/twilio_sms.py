"""SMS through the real ``twilio`` client: the raw->internal status map and error typing live here."""

from collections.abc import Mapping
from datetime import datetime, timedelta

import requests
from twilio.base import values
from twilio.base.exceptions import TwilioRestException
from twilio.rest import Client
from twilio.rest.api.v2010.account.message import MessageInstance
from urllib3.exceptions import NewConnectionError

from notify.rules.vocabulary import Normalized
from notify.transports.base import (
    ConfigurationError,
    Neighbours,
    PermanentError,
    Receipt,
    SmsMessage,
    TransientError,
    UnknownOutcome,
)

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


# Refusals of our account or credentials (20003 authentication, 20005 account not active,
# 20403 forbidden): only an operator can fix them. Busy signals about our traffic (20429 too
# many requests, 30001 queue overflow): nothing was sent, a later retry may pass.
_MISCONFIGURED = frozenset({20003, 20005, 20403})
_BUSY = frozenset({20429, 30001})


def normalize(raw_status: str) -> Normalized:
    return STATUS_MAP.get(raw_status, Normalized.PENDING)


class TwilioSms:
    """The SMS adapter. Every call is one HTTP request; none may run inside a DB transaction.

    When "not found" proves absence (the contract's ``absence_horizon``): Twilio has no create
    idempotency key and documents no bound on how long a create stays in its hands after our
    client gave up. Its own pages say a 500 may be "a timeout in the API" after which the
    message may exist (error 20500), and that retrying a send after it may reach the customer
    twice. So the horizon is configuration (``TWILIO_PROCESSING_HORIZON``, default 60 s: four
    times the 15 s Twilio allows its own outbound requests in total), counted from when our
    submit began plus our call's own bound. Before it, a list without the message proves
    nothing; where absence cannot be proven before D the email goes instead of a second SMS.
    """

    def __init__(
        self,
        client: Client,
        *,
        absence_horizon: timedelta,
        phone_redaction: bool = False,
        exclusive_senders: frozenset[str] = frozenset(),
    ) -> None:
        self._client = client
        self.absence_horizon = absence_horizon
        # With Twilio's phone number redaction the account's API masks the last digits of
        # every number, so a list filtered by the destination cannot be trusted to be
        # complete (nor, with no number to read, to be this destination's alone): a lookup
        # can then find a message by its body, never prove one absent.
        self._phone_redaction = phone_redaction
        # Senders the deployment declares no one else sends from (TWILIO_EXCLUSIVE_SENDERS):
        # only from one of these can a message without a body be told to be ours.
        self._exclusive_senders = exclusive_senders

    def submit(self, message: SmsMessage) -> Receipt:
        try:
            sent = self._client.messages.create(
                to=message.to,
                from_=message.sender,
                body=message.body,
                status_callback=message.status_callback,
                # "discard": Twilio keeps no copy of the body (and so of the reset link).
                content_retention="discard" if message.discard_content else values.unset,
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

    def find(self, message: SmsMessage, since: datetime, neighbours: Neighbours) -> Receipt | None:
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
        # Where bodies are redacted (Message Redaction, or ContentRetention=discard), what is
        # left to tell is who sent it and that none of our other messages can be it.
        unread = [
            m for m in window if not m.body and _from_sender(m, message.sender) and (m.sid or "") not in neighbours.sids
        ]
        if len(unread) == 1 and not neighbours.unidentified and self._proves_ours(message.sender):
            return _receipt(unread[0])
        if unread:
            # Presence unproven: taking a stranger's message for ours would leave ours unsent,
            # and its receipts could mark the event delivered, so no fallback either. The caller
            # never resubmits on this: our own callback or the fallback at D settles the event.
            raise UnknownOutcome("lookup_ambiguous", f"{len(unread)} redacted messages could be this one or another's")
        if self._phone_redaction:
            raise UnknownOutcome("lookup_redacted", "phone number redaction: absence cannot be proven")
        return None

    def _proves_ours(self, sender: str) -> bool:
        """Whether a body-less message from ``sender`` to this destination can only be ours: no one else
        sends from ``sender``, and the list is this destination's alone (no phone number redaction)."""
        return sender in self._exclusive_senders and not self._phone_redaction


def _from_sender(listed: MessageInstance, sender: str) -> bool:
    # A Messaging Service picks the number itself: its messages carry the service's sid instead.
    return sender in (listed.from_ or "", listed.messaging_service_sid or "")


def _receipt(message: MessageInstance) -> Receipt:
    raw = message.status or ""
    return Receipt(normalize(raw), raw, message.sid or "", message.date_updated)


def _typed(error: TwilioRestException) -> Exception:
    raw = f"http_{error.status}" + (f"_{error.code}" if error.code else "")
    if error.status == 401 or error.code in _MISCONFIGURED or (error.status == 403 and not error.code):
        # Our credentials or account are refused: nothing was sent, and every other event fails alike.
        # (A 403 naming the destination, like 21408 for a country not enabled, is about that one.)
        return ConfigurationError(raw)
    if error.status == 429 or error.code in _BUSY:
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
