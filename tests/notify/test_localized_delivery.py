"""An Austrian subscriber's reset, end to end: the worker sends the German SMS through Twilio's API (the
simulator) and, when no receipt comes, the German email through a real SMTP server, each with the
expiry in Vienna's time; the roll-up counts both under the German set, the SMS by its segments."""

import socket
from email import message_from_bytes
from email import policy as email_policy
from email.message import EmailMessage
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from notify import tallies
from notify.models import Claim, Event, Tally
from notify.rules.vocabulary import Channel, State
from notify.transports import Transports
from notify.transports.twilio_client import make_client
from policies.datafiles import DEFAULTS_DIR, load
from tests.conftest import T0
from tests.factories import CANARY_RESET_URL, new_event
from tests.notify.workers import SlowTwilio, run_until_settled, sms_count

pytestmark = pytest.mark.django_db(transaction=True)

# A valid Austrian mobile number (EU policy: +43 is allowed, consent is required).
AUSTRIAN_PHONE = "+436641234567"
ADDRESS = "teilnehmer@example.at"


class Inbox:
    """An aiosmtpd handler that keeps every message it is given."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        parsed = message_from_bytes(envelope.original_content, policy=email_policy.default)
        assert isinstance(parsed, EmailMessage)
        self.messages.append(parsed)
        return "250 Message accepted"


@pytest.fixture
def inbox(transports, settings):
    with socket.socket() as probe:  # a free port for the server
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    handler = Inbox()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_PORT = port
    yield handler
    controller.stop()


@pytest.fixture
def eu_policy(transactional_db):
    return load(DEFAULTS_DIR / "eu.toml", now=T0).version


def test_an_austrian_subscriber_gets_the_german_sms_and_email_with_the_expiry_in_vienna_time(
    eu_policy, inbox, simulator, transports, clock, settings
):
    simulator.control.script_sms(AUSTRIAN_PHONE, create=["accept"], statuses=[["sent", 0]], callbacks="drop")
    event = new_event(
        clock.now(),
        region="EU",
        phone=AUSTRIAN_PHONE,
        email=ADDRESS,
        consent=True,
        locale="de-AT",
        time_zone="Europe/Vienna",
    )

    assert run_until_settled(event.id, transports, clock).state == State.EMAIL_ACCEPTED

    # 12:10 UTC on 1 January is 13:10 in Vienna (CET, GMT+1).
    twilio = make_client(
        settings.TWILIO_ACCOUNT_SID, settings.TWILIO_AUTH_TOKEN, api_base=simulator.base_url, timeout=5
    )
    [sms] = twilio.messages.list(to=AUSTRIAN_PHONE)
    assert sms.body == f"Passwort zurücksetzen: {CANARY_RESET_URL} (gültig bis 13:10 GMT+01:00)"
    [email] = inbox.messages
    assert email["Subject"] == "Ihr Link zum Zurücksetzen des Passworts"
    assert email["Content-Language"] == "de"
    assert "List-Unsubscribe" not in email
    text = email.get_content().replace("\r\n", "\n")  # SMTP lines end in CRLF
    assert text.startswith("Sie haben das Zurücksetzen Ihres Passworts angefordert.")
    assert f"Öffnen Sie diesen Link vor 13:10 (GMT+01:00):\n{CANARY_RESET_URL}" in text
    assert Claim.objects.get(event=event, channel=Channel.SMS).segments == 1
    assert Event.objects.get(pk=event.id).message_locale == "de"


def test_messages_are_counted_by_region_channel_and_set_and_sms_by_segments(
    eu_policy, inbox, simulator, transports, clock
):
    simulator.control.script_sms(AUSTRIAN_PHONE, create=["accept"], statuses=[["sent", 0]], callbacks="drop")
    for locale in ("de-AT", "el", ""):
        event = new_event(clock.now(), region="EU", phone=AUSTRIAN_PHONE, email=ADDRESS, consent=True, locale=locale)
        run_until_settled(event.id, transports, clock)

    tallies.roll_up(clock.now() + tallies.SETTLE + tallies.SETTLE)
    counted = {
        (name, label): value
        for name, label, value in Tally.objects.filter(region="EU").values_list("name", "label", "value")
    }

    for locale in ("de", "el", "default"):
        assert counted[(tallies.MESSAGES, f"sms/{locale}")] == 1
        assert counted[(tallies.MESSAGES, f"email/{locale}")] == 1
    # The Greek SMS is UCS-2: two segments; German and English fit one.
    assert counted[(tallies.SMS_SEGMENTS, "el/2")] == 1
    assert counted[(tallies.SMS_SEGMENTS, "de/1")] == counted[(tallies.SMS_SEGMENTS, "default/1")] == 1
    assert counted[(tallies.SMS_SEGMENTS, "el/sum")] == 2


def test_an_event_inserted_by_code_from_before_the_locale_columns_gets_their_defaults(eu_policy, clock):
    """A rolling deploy: a process still running the old code inserts events without the new columns."""
    from django.db import connection

    event = new_event(clock.now(), region="EU", phone=AUSTRIAN_PHONE, email=ADDRESS, consent=True)
    new_columns = {"locale", "time_zone", "message_locale"}
    old = [f.column for f in Event._meta.concrete_fields if f.column not in new_columns | {"id", "client_key"}]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO notify_event (id, client_key, {', '.join(old)}) "
            f"SELECT 'evt_old_code', 'old-code', {', '.join(old)} FROM notify_event WHERE id = %s",
            [event.id],
        )

    inserted = Event.objects.get(pk="evt_old_code")
    assert (inserted.locale, inserted.time_zone, inserted.message_locale) == ("", "", "")


def test_a_greek_sms_twilio_takes_after_our_timeout_is_found_once_and_counted_once_with_its_segments(
    eu_policy, simulator, transports, clock, settings
):
    greek_phone = "+306912341537"
    simulator.control.script_sms(greek_phone, create=["accept"], statuses=[["sent", 0], ["delivered", 0]])
    event = new_event(clock.now(), region="EU", phone=greek_phone, email=ADDRESS, consent=True, locale="el-GR")
    # Our client gives up on the create; Twilio lists the message 15 s after it came in.
    slow = SlowTwilio(transports.sms, clock, accept_after=15)

    settled = run_until_settled(event.id, Transports(slow, transports.email), clock)
    tallies.roll_up(clock.now() + tallies.SETTLE + tallies.SETTLE)

    assert settled.state == State.SMS_DELIVERED
    assert sms_count(simulator, event.id) == 1
    claim = Claim.objects.get(event=event, channel=Channel.SMS)
    assert (claim.attempts, claim.segments) == (1, 2)
    twilio = make_client(
        settings.TWILIO_ACCOUNT_SID, settings.TWILIO_AUTH_TOKEN, api_base=simulator.base_url, timeout=5
    )
    [sms] = twilio.messages.list(to=greek_phone)
    assert sms.body.startswith(f"Επαναφορά κωδικού: {CANARY_RESET_URL} (λήξη: ")
    counted = dict(Tally.objects.filter(region="EU").values_list("label", "value"))
    assert (counted["sms/el"], counted["el/2"], counted["el/count"]) == (1, 1, 1)
