"""Send signed status callbacks the way Twilio does, faults included.

Each accepted message with a StatusCallback gets one task that sleeps until each callback is
due and posts it. A callback target that is down, slow or broken costs that task a few retries
and a log line; it never reaches the simulator's API or SMTP sink.
"""

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import aiohttp
from twilio.request_validator import RequestValidator

from simulator.account import API_VERSION, Account
from simulator.counts import Tally
from simulator.faults import CallbackFault
from simulator.messages import SmsMessage, StatusChange, new_sid

log = logging.getLogger(__name__)

# Pauses before the first and the second retry of a callback that met a connection error or a 5xx.
RETRY_PAUSES = (0.1, 0.5)


@dataclass(frozen=True)
class ScheduledCallback:
    """One callback: which status, when (seconds after creation), and how many identical copies."""

    change: StatusChange
    after_seconds: float
    copies: int = 1


def schedule(
    timeline: tuple[StatusChange, ...], fault: CallbackFault, delay: float, rng: random.Random
) -> list[ScheduledCallback]:
    """Return the callbacks for a message's timeline under ``fault``, in sending order."""
    match fault:
        case CallbackFault.NORMAL:
            return [ScheduledCallback(change, change.after_seconds) for change in timeline]
        case CallbackFault.DROP:
            return []
        case CallbackFault.DUPLICATE:
            return [ScheduledCallback(change, change.after_seconds, rng.randint(2, 3)) for change in timeline]
        case CallbackFault.REORDER:
            # Everything goes out when the last status is reached, newest first, so polling
            # never shows an older status than the last callback did.
            last = timeline[-1].after_seconds if timeline else 0.0
            return [ScheduledCallback(change, last) for change in reversed(timeline)]
        case CallbackFault.DELAY:
            return [ScheduledCallback(change, change.after_seconds + delay) for change in timeline]


class CallbackDispatcher:
    """Own the callback tasks of every message; cancel them all on reset or shutdown."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        account: Account,
        tally: Tally,
        rng: random.Random,
        clock: Callable[[], datetime],
    ) -> None:
        self._session = session
        self._account = account
        self._validator = RequestValidator(account.auth_token)
        self._tally = tally
        self._rng = rng
        self._clock = clock
        self._tasks: set[asyncio.Task[None]] = set()

    def dispatch(self, message: SmsMessage, callbacks: list[ScheduledCallback]) -> None:
        """Start sending ``callbacks`` for ``message`` in the background."""
        if not message.status_callback or not callbacks:
            return
        task = asyncio.get_running_loop().create_task(self._send_all(message, message.status_callback, callbacks))
        # The loop keeps only weak references to tasks: hold them until they finish.
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def cancel_all(self) -> None:
        """Stop every pending callback."""
        for task in self._tasks:
            task.cancel()

    async def close(self) -> None:
        """Cancel every pending callback and wait for the tasks to end."""
        self.cancel_all()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _finished(self, task: "asyncio.Task[None]") -> None:
        self._tasks.discard(task)
        # Name the failure only: an exception's text could quote the callback URL or a parameter.
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("callback task failed: %s", type(exc).__name__)

    async def _send_all(self, message: SmsMessage, url: str, callbacks: list[ScheduledCallback]) -> None:
        for callback in callbacks:
            due = message.created_at.timestamp() + callback.after_seconds
            await asyncio.sleep(max(0.0, due - self._clock().timestamp()))
            params = self._params(message, callback.change)
            headers = {
                "X-Twilio-Signature": self._validator.compute_signature(url, params),
                # One token per callback: copies and retries of it carry the same one, as Twilio's do.
                "I-Twilio-Idempotency-Token": new_sid(self._rng, "ID"),
            }
            for copy in range(callback.copies):
                await self._post(message, url, params, headers, copy)

    def _params(self, message: SmsMessage, change: StatusChange) -> dict[str, str]:
        params = {
            "MessageSid": message.sid,
            "SmsSid": message.sid,
            "MessageStatus": change.status,
            "SmsStatus": change.status,
            "AccountSid": self._account.sid,
            "To": message.to,
            "ApiVersion": API_VERSION,
        }
        if message.from_:
            params["From"] = message.from_
        if message.messaging_service_sid:
            params["MessagingServiceSid"] = message.messaging_service_sid
        if change.error:
            params["ErrorCode"] = str(change.error[0])
        return params

    async def _post(
        self, message: SmsMessage, url: str, params: dict[str, str], headers: dict[str, str], copy: int
    ) -> None:
        """Post one callback, retrying on a connection error or a 5xx; log, never raise."""
        status = params["MessageStatus"]
        for attempt, pause in enumerate((0.0, *RETRY_PAUSES), start=1):
            await asyncio.sleep(pause)
            try:
                async with self._session.post(url, data=params, headers=headers) as response:
                    self._tally.callbacks_sent += 1
                    answer, done = str(response.status), response.status < 500
            except (aiohttp.ClientError, TimeoutError) as exc:
                answer, done = type(exc).__name__, False
            log.info(
                "callback sid=%s key=%s status=%s copy=%d attempt=%d answer=%s",
                message.sid,
                message.key,
                status,
                copy + 1,
                attempt,
                answer,
            )
            if done:
                return
        log.warning("callback gave up sid=%s key=%s status=%s", message.sid, message.key, status)
