"""Transport adapters behind one narrow interface (``base``), and the set the worker uses.

Every adapter call is wrapped so that it refuses to run inside a DB transaction:
intent is committed before a remote call and the outcome recorded after it
(DESIGN rule 7). The guard is always on, not only in tests: it is one attribute read.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import ParamSpec, TypeVar

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import connection

from notify.transports.base import EmailTransport, Neighbours, Receipt, SmsMessage, SmsTransport
from notify.transports.smtp_email import SmtpEmail
from notify.transports.twilio_client import make_client, request_bound
from notify.transports.twilio_sms import TwilioSms

P = ParamSpec("P")
R = TypeVar("R")


class TransactionOpenError(AssertionError):
    """A remote call was attempted with a DB transaction open."""


def outside_transaction(call: Callable[P, R]) -> Callable[P, R]:
    """Return ``call``, refusing to run while the default connection is inside a transaction."""

    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        if connection.in_atomic_block:
            raise TransactionOpenError(f"{call.__qualname__} called inside a DB transaction")
        return call(*args, **kwargs)

    return guarded


class GuardedSms:
    def __init__(self, inner: SmsTransport) -> None:
        self.absence_horizon = inner.absence_horizon
        self.submit: Callable[[SmsMessage], Receipt] = outside_transaction(inner.submit)
        self.fetch: Callable[[str], Receipt] = outside_transaction(inner.fetch)
        self.find: Callable[[SmsMessage, datetime, Neighbours], Receipt | None] = outside_transaction(inner.find)


class GuardedEmail:
    def __init__(self, inner: EmailTransport) -> None:
        self._send = outside_transaction(inner.send)

    def send(self, message: EmailMessage, *, within: timedelta) -> Receipt:
        return self._send(message, within=within)


@dataclass(frozen=True)
class Transports:
    sms: SmsTransport
    email: EmailTransport

    @classmethod
    def guarded(cls, sms: SmsTransport, email: EmailTransport) -> "Transports":
        return cls(GuardedSms(sms), GuardedEmail(email))


def call_bound(channel: str) -> timedelta:
    """Return the longest one provider call on ``channel`` can take: the deadline its transport enforces.

    Each call has one deadline over the whole exchange (name lookup, connect, TLS and every
    read), cut there whatever the peer does: an SMS call's is ``request_bound`` of the Twilio
    client's timeout (a connect and one small answer), an email send's ``EMAIL_SEND_DEADLINE``.
    A call cut at its deadline after its request went out is settled by lookup (SMS) or
    recorded as an unknown outcome (email), never resubmitted blind.
    """
    if channel == "sms":
        return request_bound(settings.TWILIO_TIMEOUT)
    return timedelta(seconds=settings.EMAIL_SEND_DEADLINE)


def lease_hold(channel: str, lease_ttl: timedelta) -> timedelta:
    """Return how long a worker keeps its lease from the intent to call: the whole call, and a margin
    for recording its outcome, so no one takes over an event whose holder is only slow."""
    return max(lease_ttl, call_bound(channel) + settings.NOTIFY_LEASE_MARGIN)


@cache
def configured() -> Transports:
    """Return the transports the settings describe (one Twilio client per process)."""
    client = make_client(
        settings.TWILIO_ACCOUNT_SID,
        settings.TWILIO_AUTH_TOKEN,
        api_base=settings.TWILIO_API_BASE,
        timeout=settings.TWILIO_TIMEOUT,
    )
    sms = TwilioSms(
        client,
        absence_horizon=settings.TWILIO_PROCESSING_HORIZON,
        phone_redaction=settings.TWILIO_PHONE_REDACTION,
        exclusive_senders=frozenset(settings.TWILIO_EXCLUSIVE_SENDERS),
    )
    return Transports.guarded(sms, SmtpEmail())
