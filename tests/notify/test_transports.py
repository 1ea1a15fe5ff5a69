"""The adapters' error typing: what may have been sent is never reported as 'nothing was sent'."""

from datetime import timedelta

import pytest
from django.core.mail import EmailMessage
from twilio.base.exceptions import TwilioRestException

from notify.transports.base import ConfigurationError, PermanentError, TransientError, UnknownOutcome
from notify.transports.smtp_email import SmtpEmail
from notify.transports.twilio_sms import _typed

WITHIN = timedelta(seconds=5)


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (400, 21211, PermanentError),  # invalid 'To' number
        (400, 21610, PermanentError),  # the subscriber replied STOP
        (403, 21408, PermanentError),  # no permission to send to that destination's country
        (401, 20003, ConfigurationError),  # our credentials: nothing sent, and nothing will be until fixed
        (403, 20003, ConfigurationError),
        (403, 20005, ConfigurationError),  # the account is suspended
        (403, None, ConfigurationError),
        (429, 20429, TransientError),
        (500, None, UnknownOutcome),  # Twilio may have created it before failing
        (503, None, UnknownOutcome),
    ],
)
def test_twilio_errors_are_typed_by_what_they_prove(status, code, expected):
    error = TwilioRestException(status, "https://api.twilio.com/x", msg="refused", code=code)

    assert type(_typed(error)) is expected


@pytest.fixture
def smtp(simulator, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "127.0.0.1", simulator.smtp_port, False
    return SmtpEmail()


def test_an_email_without_recipients_is_not_reported_accepted(smtp):
    with pytest.raises(PermanentError, match="no_recipients"):
        smtp.send(EmailMessage("subject", "body", "from@example.org", []), within=WITHIN)


def test_a_malformed_address_is_refused_for_good_without_echoing_it(smtp):
    with pytest.raises(PermanentError) as refused:
        smtp.send(EmailMessage("subject", "body", "from@example.org", ["secret.person@exa\nmple.org"]), within=WITHIN)

    assert "secret.person" not in str(refused.value)


def test_a_connection_refused_is_transient(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "127.0.0.1", 9, False

    with pytest.raises(TransientError, match="connect_failed"):
        SmtpEmail().send(EmailMessage("subject", "body", "from@example.org", ["to@example.org"]), within=WITHIN)
