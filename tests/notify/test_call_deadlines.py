"""Every provider call ends at its one deadline, whatever the peer or the name lookup does.

Client libraries time each connect and each read on its own: a peer that sends a byte
just inside each read timeout, or a name lookup (which has no timeout), keeps a call going
long past the lease held for it, and a takeover then treats a slow holder as a gone one.
These peers are real servers on loopback; only the name lookup is stood in for.
"""

import socket
import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.core.mail import EmailMessage

from notify.transports.base import Neighbours, SmsMessage, TransientError, UnknownOutcome
from notify.transports.smtp_email import SmtpEmail
from notify.transports.twilio_client import make_client
from notify.transports.twilio_sms import TwilioSms

# The Twilio client's timeout per connect and per read; the call's one deadline is twice it.
TWILIO_TIMEOUT = 0.5

MESSAGE = SmsMessage(to="+14155550142", sender="+15005550006", body="Reset: link", status_callback="http://x/cb")
MESSAGE_SINCE = datetime(2026, 1, 1, tzinfo=UTC)


class Dribbler:
    """A peer on loopback that, once a client connects (and, for HTTP, has sent its request),
    answers piece by piece, each ``pace`` seconds apart; it notes whether the client took all of it.

    Every piece comes well inside a read timeout and the whole answer takes several deadlines:
    only a deadline over the whole call ends the exchange before the answer is out.
    """

    def __init__(self, pieces: Iterable[bytes], *, pace: float, reads_request: bool) -> None:
        self._pieces = list(pieces)
        self._pace = pace
        self._reads_request = reads_request
        self.answered_whole = False
        self._client_gone = threading.Event()  # the client hung up, or the answer is all out
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        peer, _ = self._listener.accept()
        with peer:
            try:
                if self._reads_request:
                    _read_http_request(peer)
                for piece in self._pieces:
                    peer.sendall(piece)
                    if self._client_gone.wait(self._pace):
                        return
                self.answered_whole = True
            except OSError:  # the client cut the connection
                return
            finally:
                self._client_gone.set()

    def finished(self) -> bool:
        """Wait for the exchange to end (the client gone or the answer out); True if it did."""
        return self._client_gone.wait(len(self._pieces) * self._pace + 5)

    def close(self) -> None:
        self._client_gone.set()
        self._listener.close()


def _read_http_request(peer: socket.socket) -> None:
    received = b""
    while b"\r\n\r\n" not in received:
        received += peer.recv(4096)
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0
    )
    while len(body) < length:
        body += peer.recv(4096)


MESSAGE_JSON = b'{"sid": "SM00000000000000000000000000000001", "status": "queued"}'
EMPTY_LIST_JSON = b'{"messages": [], "next_page_uri": null, "page": 0, "page_size": 50}'


def dribbling_twilio(body: bytes) -> Dribbler:
    """Twilio answering 200 with ``body``, a byte at a time."""
    whole = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    return Dribbler([bytes([byte]) for byte in whole], pace=0.02, reads_request=True)


def adapter(api_base: str) -> TwilioSms:
    client = make_client(
        settings.TWILIO_ACCOUNT_SID, settings.TWILIO_AUTH_TOKEN, api_base=api_base, timeout=TWILIO_TIMEOUT
    )
    return TwilioSms(client, absence_horizon=timedelta(seconds=5))


@pytest.mark.parametrize(
    ("call", "answer", "error", "raw_status"),
    [
        # The request went out: Twilio may have created the message.
        (lambda sms: sms.submit(MESSAGE), MESSAGE_JSON, UnknownOutcome, "no_response"),
        (lambda sms: sms.fetch("SM00000000000000000000000000000001"), MESSAGE_JSON, TransientError, "poll_failed"),
        (lambda sms: sms.find(MESSAGE, MESSAGE_SINCE, Neighbours()), EMPTY_LIST_JSON, UnknownOutcome, "lookup_failed"),
    ],
    ids=["submit", "poll", "lookup"],
)
def test_an_sms_call_to_a_provider_dribbling_its_answer_ends_at_the_calls_deadline(call, answer, error, raw_status):
    twilio = dribbling_twilio(answer)
    sms = adapter(f"http://127.0.0.1:{twilio.port}")

    try:
        with pytest.raises(error) as ended:
            call(sms)
        assert twilio.finished()
    finally:
        twilio.close()

    assert ended.value.raw_status == raw_status
    assert not twilio.answered_whole  # the client hung up mid-answer: cut, not waited out


class HangingLookup:
    """The name lookup of one host never answering (a resolver that drops our queries), until released."""

    HOST = "api.twilio.hangs.invalid"

    def __init__(self) -> None:
        self._real = socket.getaddrinfo
        self.released = threading.Event()
        self.answered = threading.Event()

    def __call__(self, host, *args, **kwargs):
        if host != self.HOST:
            return self._real(host, *args, **kwargs)
        # Released at the end of the test, or after a while so that a client with no deadline
        # on its lookup fails the test rather than hanging it.
        self.released.wait(10 * TWILIO_TIMEOUT)
        self.answered.set()
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")


@pytest.fixture
def hanging_lookup(monkeypatch) -> Iterator[HangingLookup]:
    lookup = HangingLookup()
    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    yield lookup
    lookup.released.set()


def test_an_sms_submit_whose_name_lookup_hangs_ends_at_the_calls_deadline_with_nothing_sent(hanging_lookup):
    sms = adapter(f"http://{HangingLookup.HOST}:9")

    with pytest.raises(TransientError) as ended:
        sms.submit(MESSAGE)

    assert ended.value.raw_status == "connect_failed"  # no connection, so no request: nothing sent
    assert not hanging_lookup.answered.is_set()  # the call gave up on the lookup, not the lookup on the call


# A relay that greets in many "220-" lines, each well inside the read timeout.
GREETING = [b"220-relay.example.org ESMTP, line %d of a long banner\r\n" % n for n in range(40)] + [b"220 ready\r\n"]


@pytest.fixture
def dribbling_relay(settings) -> Iterator[Dribbler]:
    relay = Dribbler(GREETING, pace=0.1, reads_request=False)
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "127.0.0.1", relay.port, False
    settings.EMAIL_TIMEOUT = 1.0
    yield relay
    relay.close()


def test_an_email_to_a_relay_dribbling_its_greeting_ends_at_the_sends_deadline(dribbling_relay):
    message = EmailMessage("subject", "body", "from@example.org", ["to@example.org"])

    with pytest.raises(TransientError) as ended:
        SmtpEmail().send(message, within=timedelta(seconds=1))

    assert ended.value.raw_status == "connect_failed"  # cut before any mail command: nothing handed over
    assert dribbling_relay.finished()
    assert not dribbling_relay.answered_whole  # the greeting was cut off, not waited out
