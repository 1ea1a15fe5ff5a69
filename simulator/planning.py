"""Decide each message's fate when it arrives: from its destination's script, else from the profile."""

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from simulator.faults import CallbackFault, CreateFault, FinalStatus, SmtpFault
from simulator.messages import StatusChange
from simulator.profile import Profile, SmsRegion, pick
from simulator.scripts import EmailScript, SmsScript, step

T = TypeVar("T")


@dataclass(frozen=True)
class SmsPlan:
    """Everything that will happen to one create call and, if accepted, to its message."""

    create: CreateFault
    timeline: tuple[StatusChange, ...]
    callbacks: CallbackFault
    callback_delay: float
    hang_seconds: float


@dataclass(frozen=True)
class EmailPlan:
    """How the SMTP sink answers one message's DATA."""

    fault: SmtpFault
    hang_seconds: float


class Planner:
    """Hold the scripts and draw everything else from the profile with one seeded generator."""

    def __init__(self, profile: Profile, rng: random.Random) -> None:
        self._profile = profile
        self._rng = rng
        self._sms: dict[str, SmsScript] = {}
        self._email: dict[str, EmailScript] = {}
        # Calls each script has served, so its steps are handed out in order.
        self._served: Counter[SmsScript | EmailScript] = Counter()

    def add(self, script: SmsScript | EmailScript) -> None:
        """Script a destination, replacing (and restarting) any earlier script for it."""
        if isinstance(script, SmsScript):
            self._sms[script.to] = script
        else:
            self._email[script.address.lower()] = script
        self._served[script] = 0

    def clear(self) -> None:
        """Forget every script."""
        self._sms.clear()
        self._email.clear()
        self._served.clear()

    def plan_sms(self, to: str) -> SmsPlan:
        """Return the plan for the next create call to ``to``."""
        region = self._profile.region_for(to)
        script = self._sms.get(to)
        if script is None:
            return SmsPlan(
                create=pick(self._rng, region.create_faults),
                timeline=self._draw_timeline(region),
                callbacks=pick(self._rng, region.callback_faults),
                callback_delay=region.callback_delay_seconds,
                hang_seconds=region.hang_seconds,
            )
        return SmsPlan(
            create=self._next_step(script, script.create),
            timeline=self._draw_timeline(region) if script.statuses is None else script.statuses,
            callbacks=script.callbacks,
            callback_delay=_or(script.callback_delay, region.callback_delay_seconds),
            hang_seconds=_or(script.hang_seconds, region.hang_seconds),
        )

    def plan_email(self, recipients: Sequence[str]) -> EmailPlan:
        """Return the plan for one message: the first scripted recipient decides, else the profile."""
        smtp = self._profile.smtp
        script = next((self._email[r.lower()] for r in recipients if r.lower() in self._email), None)
        if script is None:
            return EmailPlan(fault=pick(self._rng, smtp.faults), hang_seconds=smtp.hang_seconds)
        return EmailPlan(
            fault=self._next_step(script, script.smtp), hang_seconds=_or(script.hang_seconds, smtp.hang_seconds)
        )

    def _next_step(self, script: SmsScript | EmailScript, steps: Sequence[T]) -> T:
        chosen = step(steps, self._served[script])
        self._served[script] += 1
        return chosen

    def _draw_timeline(self, region: SmsRegion) -> tuple[StatusChange, ...]:
        sent = StatusChange("sent", region.sent_latency.draw(self._rng))
        outcome = pick(self._rng, region.outcomes)
        if outcome is FinalStatus.NO_RECEIPT:
            return (sent,)
        return (sent, StatusChange(outcome.value, sent.after_seconds + region.receipt_latency.draw(self._rng)))


def _or(scripted: float | None, profiled: float) -> float:
    return profiled if scripted is None else scripted
