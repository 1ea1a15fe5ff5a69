"""Start-up check of the SMS senders declared exclusive (``TWILIO_EXCLUSIVE_SENDERS``).

The declaration is what lets a recovery lookup take a message without a body for ours, so
a mistake in it fails one way or the other without a sound: a misspelt sender adopts
nothing, and a sender another product shares adopts that product's messages. The check
refuses what is not a sender, says when the declaration can have no effect, and otherwise
says what it means, so whoever reads the start-up output knows what was promised.
"""

import re
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Info
from django.core.checks import Warning as CheckWarning

# What a policy's ``sms_sender`` is in Twilio's terms: an E.164 number, a messaging service
# SID, or an alphanumeric sender ID (1-11 letters, digits and spaces, at least one letter).
_SENDER = re.compile(r"\+[1-9][0-9]{1,14}|MG[0-9a-fA-F]{32}|(?=[0-9 ]*[A-Za-z])[A-Za-z0-9 ]{1,11}")


def check_exclusive_senders(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    senders: list[str] = settings.TWILIO_EXCLUSIVE_SENDERS
    if not senders:
        return []
    if malformed := [sender for sender in senders if not _SENDER.fullmatch(sender)]:
        return [
            Error(
                f"TWILIO_EXCLUSIVE_SENDERS names what is not an SMS sender: {', '.join(malformed)}.",
                hint="Name each sender as the policies' sms_sender does: an E.164 number (+15005550006), "
                "a messaging service SID (MG and 32 hex digits) or an alphanumeric sender ID.",
                id="notify.E001",
            )
        ]
    if settings.TWILIO_PHONE_REDACTION:
        return [
            CheckWarning(
                "TWILIO_EXCLUSIVE_SENDERS has no effect with TWILIO_PHONE_REDACTION: with the destination "
                "masked, a message without a body cannot be told to be this subscriber's, whoever sent it.",
                hint="An SMS whose outcome is unknown is settled by its status callback or by the email "
                "fallback at D; unset TWILIO_EXCLUSIVE_SENDERS, or turn the account's phone redaction off.",
                id="notify.W001",
            )
        ]
    return [
        Info(
            f"TWILIO_EXCLUSIVE_SENDERS declares that only this deployment sends from {', '.join(senders)}: "
            "where Twilio keeps no message body, SMS recovery takes a message from one of them to the "
            "subscriber, when none of our other messages can be it, to be the event's own.",
            hint="If another product, account or service sends from one of them, remove it: a message of "
            "theirs could be taken for ours, and ours would then never be sent.",
            id="notify.I001",
        )
    ]
