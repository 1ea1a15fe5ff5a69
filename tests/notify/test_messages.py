"""The rendered reset email carries transactional headers only, and a stable Message-ID."""

import pytest

from notify import messages
from notify.vault import Destinations
from policies.models import MessagePurpose
from tests.conftest import T0
from tests.factories import CANARY_EMAIL, CANARY_PHONE, CANARY_RESET_URL, PolicyVersionFactory

DESTINATIONS = Destinations(phone=CANARY_PHONE, email=CANARY_EMAIL, reset_url=CANARY_RESET_URL)


def test_the_reset_email_has_no_list_unsubscribe_headers_and_a_deterministic_message_id():
    policy = PolicyVersionFactory.build()

    email = messages.reset_email("evt_01ABC", policy, DESTINATIONS, T0).message()
    again = messages.reset_email("evt_01ABC", policy, DESTINATIONS, T0).message()

    assert "List-Unsubscribe" not in email
    assert "List-Unsubscribe-Post" not in email
    assert email["Message-ID"] == again["Message-ID"] == "<reset-email.evt_01ABC@example.org>"
    assert email["Auto-Submitted"] == "auto-generated"
    assert email["To"] == CANARY_EMAIL
    assert CANARY_RESET_URL in email.get_payload()


def test_the_sms_text_carries_the_link_unescaped():
    policy = PolicyVersionFactory.build(sms_template="Reset: {{ reset_url }}&x")

    assert messages.sms_text(policy, DESTINATIONS, T0) == f"Reset: {CANARY_RESET_URL}&x"


def test_a_marketing_policy_is_refused_by_this_workflow():
    policy = PolicyVersionFactory.build(purpose=MessagePurpose.MARKETING)

    with pytest.raises(messages.NotTransactional, match="transactional"):
        messages.reset_email("evt_01ABC", policy, DESTINATIONS, T0)
