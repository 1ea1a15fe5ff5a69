import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import factory

from policies.models import ChannelPlan, PolicyVersion, Stage


class PolicyVersionFactory(factory.django.DjangoModelFactory[PolicyVersion]):
    """A published policy with round numbers that make budgets easy to compute by hand."""

    class Meta:
        model = PolicyVersion

    region = "US"
    number = factory.Sequence(lambda n: n + 1)
    status = Stage.PUBLISHED
    published_at = datetime(2025, 1, 1, tzinfo=UTC)
    poll_interval = timedelta(seconds=10)
    sms_budget = timedelta(seconds=60)
    fallback_reserve = timedelta(seconds=120)
    poll_cost = timedelta(seconds=2)
    select_cost = timedelta(seconds=1)
    email_submit_cost = timedelta(seconds=5)
    record_cost = timedelta(seconds=1)
    lease_ttl = timedelta(seconds=30)
    email_attempt_limit = 3
    email_backoff = timedelta(seconds=10)
    page_margin = timedelta(seconds=30)
    vault_retention = timedelta(hours=1)
    raw_payload_retention = timedelta(days=2)
    observation_retention = timedelta(days=14)
    max_lifetime = timedelta(hours=1)
    channel_plan = ChannelPlan.SMS_THEN_EMAIL
    allowed_sms_country_codes = factory.LazyFunction(lambda: [1, 44])
    sms_sender = "+15005550006"
    email_from = "no-reset-reply@example.org"
    sms_template = "Reset: {{ reset_url }}"
    sms_max_segments = 1
    reset_url_max_length = 80
    email_subject_template = "Your password reset link"
    email_body_template = "Open {{ reset_url }} before {{ expires_at }}."


# Recognizable personal data: a canary test can search every output for these.
CANARY_PHONE = "+14155550123"
CANARY_EMAIL = "canary.subscriber@example.org"
CANARY_RESET_URL = "https://accounts.example.org/reset/canary-token-7f3a"


def reset_request(**overrides):
    from notify.intake import ResetRequest

    fields: dict[str, Any] = {
        "service": "accounts",
        "client_key": str(uuid.uuid4()),
        "region": "US",
        "purpose": "password_reset",
        "phone": CANARY_PHONE,
        "email": CANARY_EMAIL,
        "reset_url": CANARY_RESET_URL,
        "ttl": timedelta(seconds=600),
    }
    fields.update(overrides)
    return ResetRequest(**fields)


def new_event(now, **overrides):
    """Create an event through the real ``create_event`` and return it."""
    from notify.writes.create import create_event

    return create_event(reset_request(**overrides), now=now).event
