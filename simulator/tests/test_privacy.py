"""The simulator's log names sids, keys, statuses and faults: never a number, an address, a body or a link."""

import smtplib
from email.message import EmailMessage

import pytest
from twilio.base.exceptions import TwilioRestException

from simulator.tests.helpers import wait_for

PHONE = "+15557654321"
ADDRESS = "private.person@example.com"
LINK = "https://reset.example.com/r/secret-token-123"
BODY = f"Reset your password: {LINK}"


def test_the_log_never_contains_a_number_an_address_a_body_or_a_link(simulator, twilio, receiver):
    simulator.control.script_sms(PHONE, create=["reject", "accept"], statuses=[("sent", 0.0)])
    simulator.control.script_email(ADDRESS, smtp=["temp_fail", "accept"])

    def send_sms():
        return twilio.messages.create(
            to=PHONE, from_="+15550000000", body=BODY, status_callback=receiver.url("evt_privacy")
        )

    def send_email():
        email = EmailMessage()
        email["From"], email["To"], email["Subject"] = "noreply@notify.invalid", ADDRESS, "Reset"
        email.set_content(BODY)
        with smtplib.SMTP("127.0.0.1", simulator.smtp_port, timeout=5) as smtp:
            smtp.send_message(email)

    with pytest.raises(TwilioRestException):
        send_sms()
    sid = send_sms().sid
    twilio.messages.list(to=PHONE)
    with pytest.raises(smtplib.SMTPDataError):
        send_email()
    send_email()

    log = wait_for(lambda: text if f"callback sid={sid}" in (text := simulator.log_text()) else None)

    for secret in (PHONE, PHONE.lstrip("+"), ADDRESS, BODY, LINK, "secret-token"):
        assert secret not in log
