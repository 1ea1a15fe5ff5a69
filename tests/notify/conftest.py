import pytest

from notify.transports import Transports
from notify.transports.smtp_email import SmtpEmail
from notify.transports.twilio_client import make_client
from notify.transports.twilio_sms import TwilioSms


@pytest.fixture
def transports(simulator, settings):
    """The real adapters (twilio client, Django SMTP backend) pointed at the simulator."""
    # pytest-django swaps in the in-memory backend for every test; these talk real SMTP.
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = simulator.smtp_port
    settings.EMAIL_USE_TLS = False
    settings.EMAIL_TIMEOUT = 5
    client = make_client(
        settings.TWILIO_ACCOUNT_SID, settings.TWILIO_AUTH_TOKEN, api_base=simulator.base_url, timeout=5
    )
    return Transports.guarded(TwilioSms(client), SmtpEmail())
