"""A worker process keeps its provider connections: one HTTP keep-alive session to Twilio, one
SMTP connection per thread, checked before use and replaced within the send's deadline."""

import asyncio
import socket
import time
from datetime import timedelta

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP
from django.core.mail import EmailMessage

from notify.transports.base import SmsMessage, TransientError
from notify.transports.smtp_email import KEPT_CHECK_SECONDS, SmtpEmail
from tests.notify.workers import next_phone
from tests.providers import simulated_transports

WITHIN = timedelta(seconds=5)


def message(n: int) -> EmailMessage:
    return EmailMessage(
        "subject", "body", "from@example.org", [f"to{n}@example.org"], headers={"Message-ID": f"<{n}@t>"}
    )


def test_every_sms_request_of_a_worker_goes_over_one_keep_alive_connection(simulator, settings):
    sms = simulated_transports(simulator, settings).sms
    phone = next_phone()
    simulator.control.script_sms(phone, create=["accept"] * 3, statuses=[["sent", 0]], callbacks="drop")
    sent = SmsMessage(to=phone, sender="+15005550006", body="b", status_callback="http://127.0.0.1:9/cb", reference="r")
    receipts = [sms.submit(sent) for _ in range(3)]
    for receipt in receipts:
        sms.fetch(receipt.provider_ref)

    assert simulator.control.counts()["sms_api_connections"] == 1


def test_emails_sent_one_after_another_share_one_smtp_connection(simulator, settings):
    email = simulated_transports(simulator, settings).email

    for n in range(3):
        email.send(message(n), within=WITHIN)

    counts = simulator.control.counts()
    assert counts["smtp_connections"] == 1
    assert sorted(counts["email"].values()) == [1, 1, 1]


class _Relay:
    """A real SMTP relay on loopback whose idle timeout and NOOP answer the test chooses."""

    def __init__(self, *, idle_timeout: float = 300, noop_delay: float = 0.0) -> None:
        self.connections = 0
        self.received: list[str] = []
        relay = self

        class Handler:
            async def handle_DATA(self, server, session, envelope):
                relay.received.append(envelope.rcpt_tos[0])
                return "250 2.0.0 OK"

            async def handle_NOOP(self, server, session, envelope, arg):
                await asyncio.sleep(noop_delay)
                return "250 OK"

        class CountingSMTP(SMTP):
            def connection_made(self, transport):
                relay.connections += 1
                super().connection_made(transport)

        class CountingController(Controller):
            def factory(self):
                return CountingSMTP(self.handler, timeout=idle_timeout, hostname="relay.test")

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.controller = CountingController(Handler(), hostname="127.0.0.1", port=self.port)
        self.controller.start()
        self.connections = 0  # start() connects once itself, to see the server answer

    def stop(self) -> None:
        self.controller.stop()


@pytest.fixture
def relay_factory(settings):
    started: list[_Relay] = []

    def start(**options) -> _Relay:
        relay = _Relay(**options)
        started.append(relay)
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "127.0.0.1", relay.port, False
        settings.EMAIL_TIMEOUT = 5
        return relay

    yield start
    for relay in started:
        relay.stop()


def test_a_kept_connection_the_relay_closed_while_idle_is_replaced_and_the_email_goes_out(relay_factory):
    relay = relay_factory(idle_timeout=0.3)
    email = SmtpEmail()
    email.send(message(1), within=WITHIN)
    time.sleep(0.8)  # the relay hangs up on the idle connection

    email.send(message(2), within=WITHIN)

    assert relay.received == ["to1@example.org", "to2@example.org"]
    assert relay.connections == 2


def test_a_kept_connection_that_stops_answering_is_given_up_quickly_and_the_send_keeps_its_deadline(relay_factory):
    relay = relay_factory(noop_delay=10)
    email = SmtpEmail()
    email.send(message(1), within=WITHIN)

    started = time.monotonic()
    email.send(message(2), within=timedelta(seconds=3))
    took = time.monotonic() - started

    assert relay.received == ["to1@example.org", "to2@example.org"]
    assert relay.connections == 2
    # The unanswered NOOP cost its own short bound, not the send's deadline.
    assert took < KEPT_CHECK_SECONDS + 1.5


def test_a_failed_send_does_not_keep_its_connection(simulator, settings):
    email = simulated_transports(simulator, settings).email
    simulator.control.script_email("to1@example.org", smtp=["temp_fail"])

    with pytest.raises(TransientError, match="smtp_451"):
        email.send(message(1), within=WITHIN)
    email.send(message(2), within=WITHIN)

    assert simulator.control.counts()["smtp_connections"] == 2
