"""The start-up check of TWILIO_EXCLUSIVE_SENDERS: refuses what is not a sender, and says what the declaration means."""

from django.core import checks

SENDER = "+15005550006"


def check_ids():
    return {message.id: message for message in checks.run_checks()}


def test_a_declared_sender_is_reported_at_start_up_with_what_the_declaration_means(settings):
    settings.TWILIO_EXCLUSIVE_SENDERS = [SENDER, "MG" + "0" * 32, "Acme"]

    reported = check_ids()["notify.I001"]

    assert reported.level == checks.INFO
    assert SENDER in reported.msg
    assert "Acme" in reported.msg
    assert "another product" in reported.hint


def test_a_declaration_phone_redaction_voids_is_a_warning(settings):
    settings.TWILIO_EXCLUSIVE_SENDERS = [SENDER]
    settings.TWILIO_PHONE_REDACTION = True

    assert check_ids()["notify.W001"].level == checks.WARNING


def test_what_is_not_a_sender_is_an_error(settings):
    settings.TWILIO_EXCLUSIVE_SENDERS = ["15005550006", "Far too long a sender id"]

    refused = check_ids()["notify.E001"]

    assert refused.level == checks.ERROR
    assert "15005550006" in refused.msg
    assert "Far too long" in refused.msg
