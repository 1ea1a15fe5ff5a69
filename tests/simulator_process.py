"""Pytest fixtures that run the provider simulator as a real process (``manage.py run_simulator``).

Registered in the root conftest with ``pytest_plugins = ["tests.simulator_process"]``.
"""

from collections.abc import Iterator
from datetime import timedelta

import pytest

from notify.simulator.process import STARTUP_TIMEOUT_SECONDS, RunningSimulator, start_simulator
from notify.transports import Transports
from notify.transports.smtp_email import SmtpEmail
from notify.transports.twilio_client import make_client
from notify.transports.twilio_sms import TwilioSms

# The simulator has created a message by the time its create call answers (a fault that holds
# the answer holds it after the creation, or, for a late acceptance, for seconds the tests
# choose): a horizon of seconds covers it, where Twilio's own needs a minute.
SIMULATOR_PROCESSING_HORIZON = timedelta(seconds=5)


@pytest.fixture(scope="session")
def simulator_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSimulator]:
    """Run one simulator for the whole session."""
    simulator = start_simulator(tmp_path_factory.mktemp("simulator") / "simulator.log", "--seed", "1")
    try:
        simulator.control.wait_until_up(STARTUP_TIMEOUT_SECONDS)
        yield simulator
    finally:
        simulator.stop()


@pytest.fixture
def simulator(simulator_process: RunningSimulator) -> RunningSimulator:
    """Return the session's simulator with no messages, counts or scripts left by earlier tests."""
    simulator_process.control.reset()
    return simulator_process


@pytest.fixture
def transports(simulator: RunningSimulator, settings) -> Transports:
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
    sms = TwilioSms(client, absence_horizon=SIMULATOR_PROCESSING_HORIZON)
    return Transports.guarded(sms, SmtpEmail())
