"""Hold everything the simulator keeps: in memory only, numbers, addresses and bodies included."""

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from aiohttp import web

from simulator.account import Account
from simulator.callbacks import CallbackDispatcher, schedule
from simulator.counts import Tally
from simulator.messages import SmsMessage
from simulator.pager_state import PagerStandIn
from simulator.planning import Planner, SmsPlan


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Redaction:
    """Twilio's Message Redaction, as the account has it set.

    ``body``: a message's body is no longer shown once it has been sent; ``phone``: every
    number the API shows has its last four digits masked.
    """

    body: bool = False
    phone: bool = False


@dataclass(frozen=True)
class SmtpPacing:
    """The next ``connections`` SMTP connections wait ``reply_delay`` seconds before every reply."""

    connections: int = 0
    reply_delay: float = 0.0


class SimulatorState:
    """The accepted messages, the counters, the scripts, the pending callbacks and the pager stand-in."""

    def __init__(
        self,
        account: Account,
        planner: Planner,
        callbacks: CallbackDispatcher,
        tally: Tally,
        rng: random.Random,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.account = account
        self.planner = planner
        self.callbacks = callbacks
        self.tally = tally
        self.rng = rng
        self.clock = clock
        self.messages: dict[str, SmsMessage] = {}
        self.redaction = Redaction()
        self.smtp_pacing = SmtpPacing()
        self.pager = PagerStandIn(clock)

    def accept(self, message: SmsMessage, plan: SmsPlan) -> None:
        """Store and count an accepted message, and start its callbacks."""
        self.messages[message.sid] = message
        self.tally.sms[message.key] += 1
        self.callbacks.dispatch(message, schedule(message.timeline, plan.callbacks, plan.callback_delay, self.rng))

    def next_smtp_reply_delay(self) -> float:
        """Return how long a new SMTP connection waits before each reply (using up one paced connection)."""
        self.tally.smtp_connections += 1
        pacing = self.smtp_pacing
        if pacing.connections <= 0:
            return 0.0
        self.smtp_pacing = SmtpPacing(pacing.connections - 1, pacing.reply_delay)
        self.tally.smtp_paced_connections += 1
        return pacing.reply_delay

    def reset(self) -> None:
        """Forget every message, count, script and setting; stop pending callbacks and any pager outage."""
        self.callbacks.cancel_all()
        self.messages.clear()
        self.tally.clear()
        self.planner.clear()
        self.redaction = Redaction()
        self.smtp_pacing = SmtpPacing()
        self.pager.reset()


STATE = web.AppKey("state", SimulatorState)
