import re

import pytest

from simulator.faults import CallbackFault, CreateFault, SmtpFault
from simulator.messages import StatusChange
from simulator.scripts import EmailScript, ScriptError, SmsScript, parse_script


def test_an_sms_script_names_no_fault_it_does_not_list():
    assert parse_script({"to": "+15551230001"}) == SmsScript(
        to="+15551230001",
        create=(CreateFault.ACCEPT,),
        statuses=None,
        callbacks=CallbackFault.NORMAL,
        callback_delay=None,
        hang_seconds=None,
    )


def test_an_sms_script_reads_every_field():
    script = parse_script(
        {
            "to": "+15551230001",
            "create": ["accept_then_drop", "accept"],
            "statuses": [["sent", 0.05], ["delivered", 0.2]],
            "callbacks": "duplicate",
            "callback_delay": 1,
            "hang_seconds": 5,
        }
    )

    assert script == SmsScript(
        to="+15551230001",
        create=(CreateFault.ACCEPT_THEN_DROP, CreateFault.ACCEPT),
        statuses=(StatusChange("sent", 0.05), StatusChange("delivered", 0.2)),
        callbacks=CallbackFault.DUPLICATE,
        callback_delay=1.0,
        hang_seconds=5.0,
    )


def test_an_empty_status_list_means_no_receipt_ever():
    script = parse_script({"to": "+15551230001", "statuses": []})

    assert isinstance(script, SmsScript)
    assert script.statuses == ()


def test_an_email_script_reads_its_faults():
    assert parse_script({"email": "a@example.com", "smtp": ["drop_after_data", "accept"], "hang_seconds": 2}) == (
        EmailScript(address="a@example.com", smtp=(SmtpFault.DROP_AFTER_DATA, SmtpFault.ACCEPT), hang_seconds=2.0)
    )


@pytest.mark.parametrize(
    ("script", "error"),
    [
        ({}, 'a script names exactly one destination: "to" (SMS) or "email"'),
        ({"to": "+15551230001", "email": "a@example.com"}, "a script names exactly one destination"),
        ([], "document: must be a table"),
        ({"to": ""}, "to: must be a non-empty string"),
        ({"to": "+15551230001", "colour": "red"}, "colour: unknown key"),
        ({"to": "+15551230001", "smtp": ["accept"]}, "smtp: unknown key"),
        ({"to": "+15551230001", "create": ["explode"]}, "create: 'explode' is not one of accept, reject"),
        ({"to": "+15551230001", "create": []}, "create: must be a non-empty list"),
        ({"to": "+15551230001", "callbacks": "sometimes"}, "callbacks: 'sometimes' is not one of normal, drop"),
        ({"to": "+15551230001", "statuses": "delivered"}, "statuses: must be a list of [status, seconds] pairs"),
        ({"to": "+15551230001", "statuses": [["sent"]]}, "statuses[0]: must be a [status, seconds] pair"),
        ({"to": "+15551230001", "statuses": [["lost", 1]]}, "statuses[0]: 'lost' is not one of delivered"),
        ({"to": "+15551230001", "statuses": [["sent", "soon"]]}, "statuses[0]: must be a number"),
        ({"to": "+15551230001", "statuses": [["sent", -1]]}, "statuses[0]: seconds must not be negative"),
        (
            {"to": "+15551230001", "statuses": [["sent", 2], ["delivered", 1]]},
            "statuses[1]: seconds must not be negative nor earlier than the previous status",
        ),
        ({"to": "+15551230001", "hang_seconds": -5}, "hang_seconds: must not be negative"),
        ({"to": "+15551230001", "callback_delay": True}, "callback_delay: must be a number"),
        ({"email": "a@example.com", "smtp": ["bounce"]}, "smtp: 'bounce' is not one of accept, temp_fail"),
    ],
)
def test_an_invalid_script_is_refused_naming_the_field(script, error):
    with pytest.raises(ScriptError, match="^" + re.escape(error)):
        parse_script(script)
