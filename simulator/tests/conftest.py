from collections.abc import Iterator

import pytest
from django.conf import settings

from notify.transports.twilio_client import make_client
from simulator.process import RunningSimulator
from simulator.tests.helpers import CallbackReceiver, running_receiver


@pytest.fixture
def twilio(simulator: RunningSimulator):
    """Return the real twilio client, pointed at the simulator."""
    return make_client(
        settings.TWILIO_ACCOUNT_SID, settings.TWILIO_AUTH_TOKEN, api_base=simulator.base_url, timeout=5.0
    )


@pytest.fixture
def receiver() -> Iterator[CallbackReceiver]:
    """Run a callback receiver on loopback for one test."""
    with running_receiver() as receiver:
        yield receiver
