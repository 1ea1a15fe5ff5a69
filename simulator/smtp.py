"""Sink every message sent over SMTP, answering its DATA as the plan says and counting it by Message-ID."""

import asyncio
import logging
from email.parser import BytesHeaderParser
from typing import Any, AnyStr

from aiosmtpd.smtp import SMTP, Envelope, Session

from simulator.faults import SmtpFault
from simulator.state import SimulatorState

log = logging.getLogger(__name__)

# aiosmtpd logs every sender and recipient address at INFO: keep them out of the simulator's logs.
logging.getLogger("mail.log").setLevel(logging.WARNING)

NO_MESSAGE_ID = "(no Message-ID)"
_REPLIES = {
    SmtpFault.ACCEPT: "250 2.0.0 OK",
    SmtpFault.TEMP_FAIL: "451 4.3.0 Temporary failure, try again later",
    SmtpFault.PERM_FAIL: "550 5.7.1 Message rejected",
    SmtpFault.DROP_AFTER_DATA: "250 2.0.0 OK",  # never sent: the connection is closed first
    SmtpFault.HANG: "250 2.0.0 OK",
}


class PacedSMTP(SMTP):
    """An SMTP server that waits before every reply: a relay slow at each step, each under any read timeout."""

    def __init__(self, handler: "SmtpSink", *, reply_delay: float, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self._reply_delay = reply_delay

    async def push(self, status: AnyStr) -> None:
        if self._reply_delay:
            await asyncio.sleep(self._reply_delay)
        await super().push(status)


class SmtpSink:
    """An aiosmtpd handler: accepts any recipient; faults are decided when DATA ends."""

    def __init__(self, state: SimulatorState) -> None:
        self._state = state

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        """Answer one message per its recipients' plan; count it if that plan accepts it."""
        plan = self._state.planner.plan_email(envelope.rcpt_tos)
        key = message_id(envelope.original_content or b"")
        if plan.fault.accepts:
            self._state.tally.email[key] += 1
        else:
            self._state.tally.email_rejected += 1
        log.info("email %s message_id=%s", plan.fault, key)
        match plan.fault:
            case SmtpFault.DROP_AFTER_DATA:
                # RFC 1047: the server took the message but the client never hears so,
                # and a careful client sends it again.
                if server.transport is not None:
                    server.transport.close()
            case SmtpFault.HANG:
                await asyncio.sleep(plan.hang_seconds)
        return _REPLIES[plan.fault]


def message_id(content: bytes) -> str:
    """Return the message's Message-ID header as sent (unfolded), the key it is counted under."""
    # The raw value, not a parsed msg-id: the count must match what the sender wrote, even a sloppy id.
    value = BytesHeaderParser().parsebytes(content).get("Message-ID")
    return "".join(str(value).split()) if value else NO_MESSAGE_ID
