"""The rendered messages: transactional headers, a stable Message-ID, the subscriber's language and time zone."""

from datetime import UTC, datetime

import pytest

from notify import messages
from notify.vault import Destinations
from policies.datafiles import DEFAULTS_DIR, read
from policies.models import MessageCategory, PolicyVersion
from policies.rendering import Audience
from tests.conftest import T0
from tests.factories import CANARY_EMAIL, CANARY_PHONE, CANARY_RESET_URL, PolicyVersionFactory

DESTINATIONS = Destinations(phone=CANARY_PHONE, email=CANARY_EMAIL, reset_url=CANARY_RESET_URL)
NOWHERE = Audience()
# 21:59 UTC in winter: 22:59 in Vienna (CET), 1:59 PM in Los Angeles (PST).
EXPIRES = datetime(2026, 1, 15, 21, 59, tzinfo=UTC)


def shipped(region: str) -> PolicyVersion:
    content, _ = read(DEFAULTS_DIR / f"{region.lower()}.toml")
    return PolicyVersion(**content)


def test_the_reset_email_has_no_list_unsubscribe_headers_and_a_deterministic_message_id():
    policy = PolicyVersionFactory.build()

    email = messages.reset_email("evt_01ABC", policy, DESTINATIONS, NOWHERE, T0).message()
    again = messages.reset_email("evt_01ABC", policy, DESTINATIONS, NOWHERE, T0).message()

    assert "List-Unsubscribe" not in email
    assert "List-Unsubscribe-Post" not in email
    assert email["Message-ID"] == again["Message-ID"] == "<reset-email.evt_01ABC@example.org>"
    assert email["Auto-Submitted"] == "auto-generated"
    assert email["To"] == CANARY_EMAIL
    assert CANARY_RESET_URL in email.get_payload()


def test_the_sms_text_carries_the_link_unescaped():
    policy = PolicyVersionFactory.build(sms_template="Reset: {{ reset_url }}&x")

    assert messages.sms_text(policy, DESTINATIONS, NOWHERE, T0) == f"Reset: {CANARY_RESET_URL}&x"


def test_a_marketing_policy_is_refused_by_this_workflow():
    policy = PolicyVersionFactory.build(purpose=MessageCategory.MARKETING)

    with pytest.raises(messages.NotTransactional, match="transactional"):
        messages.reset_email("evt_01ABC", policy, DESTINATIONS, NOWHERE, T0)


def test_an_austrian_subscriber_gets_the_german_sms_with_the_expiry_in_vienna_time():
    text = messages.sms_text(shipped("EU"), DESTINATIONS, Audience("de-AT", "Europe/Vienna"), EXPIRES)

    assert text == f"Passwort zurücksetzen: {CANARY_RESET_URL} (gültig bis 22:59 GMT+01:00)"


def test_an_austrian_subscriber_gets_the_german_email_marked_as_german():
    email = messages.reset_email("evt_01ABC", shipped("EU"), DESTINATIONS, Audience("de-AT", "Europe/Vienna"), EXPIRES)

    assert email.subject == "Ihr Link zum Zurücksetzen des Passworts"
    assert "Öffnen Sie diesen Link vor 22:59 (GMT+01:00):" in email.body
    assert email.message()["Content-Language"] == "de"


def test_a_locale_the_policy_has_no_set_for_gets_the_default_in_its_language_with_the_expiry_in_its_zone():
    # Japanese: no set in the US policy, so English, and an English time (not a Japanese one).
    text = messages.sms_text(shipped("US"), DESTINATIONS, Audience("ja-JP", "America/Los_Angeles"), EXPIRES)
    email = messages.reset_email("evt_01ABC", shipped("US"), DESTINATIONS, Audience("ja-JP", ""), EXPIRES)

    assert text == f"Password reset link: {CANARY_RESET_URL} (valid until 1:59 PM GMT-08:00)"
    assert email.message()["Content-Language"] == "en"
    assert "before 9:59\u202fPM (GMT+00:00)" in email.body  # no time zone given: UTC


def test_a_twelve_hour_sms_time_uses_a_plain_space_so_the_sms_stays_gsm_7():
    # Babel separates "1:59" and "PM" with U+202F, outside GSM-7; the email keeps it.
    text = messages.sms_text(shipped("US"), DESTINATIONS, Audience("en-US", "America/Los_Angeles"), EXPIRES)

    assert "1:59 PM" in text
    assert "\u202f" not in text


def test_old_templates_that_format_expires_at_themselves_still_render():
    policy = PolicyVersionFactory.build(sms_template="{{ reset_url }} until {{ expires_at|time:'H:i' }} UTC")

    assert messages.sms_text(policy, DESTINATIONS, Audience("de-AT", "Europe/Vienna"), EXPIRES).endswith("21:59 UTC")
