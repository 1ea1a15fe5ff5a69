"""The reset messages as the transports send them, from the event's policy templates.

The rendered text contains the reset link: it is handed to a transport and never
logged, stored or returned anywhere else.
"""

from datetime import datetime

from django.conf import settings
from django.core.mail import EmailMessage
from django.urls import reverse

from notify.models import claim_key
from notify.rules.vocabulary import Channel
from notify.vault import Destinations
from policies import rendering
from policies.models import MessageCategory, PolicyVersion
from policies.rendering import Audience


class NotTransactional(Exception):
    """This workflow sends transactional messages only; a marketing policy is refused."""


def message_id(event_id: str, sender: str) -> str:
    """Return the email's Message-ID, derived from the claim key so every resubmit reuses it.

    Mail clients collapse copies with one Message-ID, which makes the rare duplicate
    after an unknown SMTP outcome (RFC 1047) harmless.
    """
    domain = sender.rpartition("@")[2] or "localhost"
    return f"<{claim_key(Channel.EMAIL, event_id).replace(':', '.')}@{domain}>"


def sms_callback_url(event_id: str) -> str:
    """Return the status callback URL Twilio is given, and that its signature is computed over."""
    return settings.PUBLIC_BASE_URL + reverse("sms-status-callback", args=[event_id])


def sms_text(policy: PolicyVersion, destinations: Destinations, audience: Audience, expires_at: datetime) -> str:
    _require_transactional(policy)
    return rendering.sms_text(policy, audience, destinations.reset_url, expires_at)


def reset_email(
    event_id: str, policy: PolicyVersion, destinations: Destinations, audience: Audience, expires_at: datetime
) -> EmailMessage:
    """Build the fallback email in the subscriber's language: transactional headers only.

    No ``List-Unsubscribe`` / ``List-Unsubscribe-Post`` (RFC 8058 is for list mail) and
    no marketing suppression: a reset the subscriber asked for must not be unsubscribable.
    """
    _require_transactional(policy)
    rendered = rendering.email(policy, audience, destinations.reset_url, expires_at)
    return EmailMessage(
        subject=rendered.subject,
        body=rendered.body,
        from_email=policy.email_from,
        to=[destinations.email],
        headers={
            "Message-ID": message_id(event_id, policy.email_from),
            "Auto-Submitted": "auto-generated",  # RFC 3834: no auto-replies to a reset
            "Content-Language": rendered.language,  # RFC 3282: the language the text is written in
        },
    )


def _require_transactional(policy: PolicyVersion) -> None:
    if policy.purpose != MessageCategory.TRANSACTIONAL:
        raise NotTransactional(f"policy {policy} has purpose {policy.purpose}: password resets are transactional")
