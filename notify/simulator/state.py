"""Hold everything the simulator keeps: in memory only, numbers, addresses and bodies included."""

import random
from collections.abc import Callable
from datetime import UTC, datetime

from aiohttp import web

from notify.simulator.account import Account
from notify.simulator.callbacks import CallbackDispatcher, schedule
from notify.simulator.counts import Tally
from notify.simulator.messages import SmsMessage
from notify.simulator.planning import Planner, SmsPlan


def utc_now() -> datetime:
    return datetime.now(UTC)


class SimulatorState:
    """The accepted messages, the counters, the scripts and the pending callbacks."""

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

    def accept(self, message: SmsMessage, plan: SmsPlan) -> None:
        """Store and count an accepted message, and start its callbacks."""
        self.messages[message.sid] = message
        self.tally.sms[message.key] += 1
        self.callbacks.dispatch(message, schedule(message.timeline, plan.callbacks, plan.callback_delay, self.rng))

    def reset(self) -> None:
        """Forget every message, count and script, and stop every pending callback."""
        self.callbacks.cancel_all()
        self.messages.clear()
        self.tally.clear()
        self.planner.clear()


STATE = web.AppKey("state", SimulatorState)
