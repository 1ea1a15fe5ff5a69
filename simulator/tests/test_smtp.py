"""The SMTP sink, through smtplib and through Django's SMTP email backend."""

import smtplib
from email.message import EmailMessage as PlainEmail

import pytest
from django.core.mail import EmailMessage, get_connection

from simulator.smtp import message_id

TO = "someone@example.com"
MESSAGE_ID = "<reset-email.evt_smtp@notify.invalid>"


def plain_message(message_id: str = MESSAGE_ID) -> PlainEmail:
    message = PlainEmail()
    message["From"] = "noreply@notify.invalid"
    message["To"] = TO
    message["Subject"] = "Reset your password"
    message["Message-ID"] = message_id
    message.set_content("Your reset link")
    return message


def send_plain(simulator, timeout: float = 5.0) -> None:
    with smtplib.SMTP("127.0.0.1", simulator.smtp_port, timeout=timeout) as smtp:
        smtp.send_message(plain_message())


def send_with_django(simulator) -> None:
    connection = get_connection(
        "django.core.mail.backends.smtp.EmailBackend",
        host="127.0.0.1",
        port=simulator.smtp_port,
        username="",
        password="",
        use_tls=False,
        timeout=5,
    )
    EmailMessage(
        "Reset your password",
        "Your reset link",
        "noreply@notify.invalid",
        [TO],
        headers={"Message-ID": MESSAGE_ID},
        connection=connection,
    ).send()


def test_an_accepted_message_is_counted_by_its_message_id(simulator):
    simulator.control.script_email(TO, smtp=["accept"])

    send_plain(simulator)

    assert simulator.control.counts()["email"] == {MESSAGE_ID: 1}


@pytest.mark.parametrize(("fault", "code"), [("temp_fail", 451), ("perm_fail", 550)])
def test_a_refused_message_raises_and_is_not_counted(simulator, fault, code):
    simulator.control.script_email(TO, smtp=[fault])

    with pytest.raises(smtplib.SMTPDataError) as refused:
        send_plain(simulator)

    assert refused.value.smtp_code == code
    counts = simulator.control.counts()
    assert (counts["email"], counts["email_rejected"]) == ({}, 1)


def test_drop_after_data_disconnects_after_the_message_was_accepted(simulator):
    simulator.control.script_email(TO, smtp=["drop_after_data"])

    with pytest.raises(smtplib.SMTPServerDisconnected):
        send_plain(simulator)

    assert simulator.control.counts()["email"] == {MESSAGE_ID: 1}


def test_hang_lets_the_client_time_out_after_the_message_was_accepted(simulator):
    simulator.control.script_email(TO, smtp=["hang"], hang_seconds=3)

    # smtplib reports a reply that never came as a disconnection, naming the timeout.
    with pytest.raises(smtplib.SMTPServerDisconnected, match="timed out"):
        send_plain(simulator, timeout=0.3)

    assert simulator.control.counts()["email"] == {MESSAGE_ID: 1}


def test_a_resend_after_a_dropped_reply_is_counted_twice_under_one_message_id(simulator):
    simulator.control.script_email(TO, smtp=["drop_after_data", "accept"])

    with pytest.raises(smtplib.SMTPServerDisconnected):
        send_plain(simulator)
    send_plain(simulator)

    assert simulator.control.counts()["email"] == {MESSAGE_ID: 2}


def test_django_email_over_smtp_is_accepted_and_counted(simulator):
    simulator.control.script_email(TO, smtp=["accept"])

    send_with_django(simulator)

    assert simulator.control.counts()["email"] == {MESSAGE_ID: 1}


def test_django_email_meets_a_dropped_reply_as_a_disconnection(simulator):
    simulator.control.script_email(TO, smtp=["drop_after_data"])

    with pytest.raises(smtplib.SMTPServerDisconnected):
        send_with_django(simulator)

    assert simulator.control.counts()["email"] == {MESSAGE_ID: 1}


def test_django_email_meets_a_temporary_failure_as_an_smtp_error(simulator):
    simulator.control.script_email(TO, smtp=["temp_fail"])

    with pytest.raises(smtplib.SMTPDataError):
        send_with_django(simulator)

    assert simulator.control.counts()["email"] == {}


@pytest.mark.parametrize(
    ("header", "key"),
    [
        (b"Message-ID: <a.b@example.com>", "<a.b@example.com>"),
        (b"Message-ID:\r\n <odd:id@example.com>", "<odd:id@example.com>"),
        (b"Subject: no id", "(no Message-ID)"),
    ],
)
def test_a_message_is_keyed_by_its_message_id_header_as_written(header, key):
    assert message_id(header + b"\r\n\r\nbody\r\n") == key
