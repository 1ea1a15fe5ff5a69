"""The product's real provider adapters, pointed at the provider simulator."""

from datetime import timedelta

from notify.transports import Transports
from notify.transports.smtp_email import SmtpEmail
from notify.transports.twilio_client import make_client
from notify.transports.twilio_sms import TwilioSms
from simulator.process import RunningSimulator

# The simulator has created a message by the time its create call answers (a fault that holds
# the answer holds it after the creation, or, for a late acceptance, for seconds the tests
# choose): a horizon of seconds covers it, where Twilio's own needs a minute.
SIMULATOR_PROCESSING_HORIZON = timedelta(seconds=5)


def simulated_transports(
    simulator: RunningSimulator, settings, *, exclusive_senders: frozenset[str] = frozenset()
) -> Transports:
    """The real adapters (twilio client, Django SMTP backend) pointed at the simulator.

    ``exclusive_senders``: the senders the deployment declares no one else sends from
    (``TWILIO_EXCLUSIVE_SENDERS``); none by default, as in a deployment that declares none.
    """
    # pytest-django swaps in the in-memory backend for every test; these talk real SMTP.
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = simulator.smtp_port
    settings.EMAIL_USE_TLS = False
    settings.EMAIL_TIMEOUT = 5
    client = make_client(
        settings.TWILIO_ACCOUNT_SID, settings.TWILIO_AUTH_TOKEN, api_base=simulator.base_url, timeout=5
    )
    sms = TwilioSms(client, absence_horizon=SIMULATOR_PROCESSING_HORIZON, exclusive_senders=exclusive_senders)
    return Transports.guarded(sms, SmtpEmail())
