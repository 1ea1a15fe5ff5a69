"""One worker step: advance an event by the actions due now, holding its lease.

A worker never sleeps holding an event. ``step_event`` takes the lease, does what
``machine.decide`` says is due (calling providers only outside any DB transaction),
records each outcome through ``notify.writes`` and gives the lease back with the
event's next wake-up recorded and sent. A duplicate or early wake-up finds the lease
held or nothing due: a no-op.
"""

import logging
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import InterfaceError, OperationalError

from notify import tallies
from notify.rules import machine
from notify.rules.vocabulary import Channel, NextAction
from notify.transports import Transports, call_bound
from notify.worker.actions import Actions, Ended
from notify.writes import leases
from notify.writes.leases import Lease
from notify.writes.reads import StepRead, read_for_step
from notify.writes.wake_ups import WakeUp, send_after_commit
from plumbing.clock import Clock

log = logging.getLogger("notify.worker")

# Enough for the longest path one step can take when everything is due at once:
# recover (absent), resubmit, fail, claim the fallback, submit the email, give up.
MAX_ACTIONS_PER_STEP = 6


@dataclass(frozen=True)
class StepReport:
    event_id: str
    # "done"; "not_due"; "busy" (another worker holds the lease); "ended" (the lease was
    # taken over or the claim moved under us); "failed" (the step raised: held back);
    # "gone" (no such event).
    result: str
    actions: tuple[NextAction, ...]
    next_action: NextAction
    next_due: datetime | None
    # When the event is next woken: the next due time, but never further off than one poll
    # interval (long ETAs are not relied on). None: someone else schedules it, or a wake-up
    # no later than this one is already pending.
    wake_after: timedelta | None = None
    wake_up: WakeUp | None = None  # the wake-up sent for it, if any


def step_event(
    event_id: str, *, transports: Transports, clock: Clock, owner: str, max_actions: int = MAX_ACTIONS_PER_STEP
) -> StepReport:
    """Do every action due now for the event, then wake it when the next one is due.

    1. Read the event; if nothing is due, stop without touching the lease.
    2. Take the lease (a conditional UPDATE that bumps the fencing token); if another
       worker holds it, stop: that worker will schedule what comes next.
    3. Loop: decide, act (remote calls outside any transaction), record the outcome
       with a compare-and-set under the lease, until nothing more is due now.
    4. Give the lease back.
    """
    started = time.monotonic()
    try:
        # The read carries the database's time: every step re-anchors the clock to it, so a
        # host whose wall clock is off still judges D, expiry and due times on the database's.
        read = read_for_step(event_id)
    except LookupError:
        return StepReport(event_id, "gone", (), NextAction.NONE, None)
    clock.sync(read.database_time, started, time.monotonic())
    loaded = read.loaded
    now = clock.now()
    decision = machine.decide(loaded.event, loaded.claims, loaded.policy, now)
    if not machine.due_now(decision, now):
        # Woken early (its sender's clock runs ahead): wake it again when it is due.
        wake_after = machine.wake_after(decision, now, loaded.policy.poll_interval)
        wake_up = _wake(event_id, now, wake_after)
        return StepReport(event_id, "not_due", (), decision.action, decision.due_at, wake_after, wake_up)
    lease = leases.take(event_id, owner, at=clock.pinned(), ttl=loaded.policy.lease_ttl)
    if lease is None:
        return StepReport(event_id, "busy", (), decision.action, decision.due_at)
    return _leased_step(read, lease, transports, clock, started, max_actions)


def step_most_urgent(
    hint: str, *, transports: Transports, clock: Clock, owner: str, max_actions: int = MAX_ACTIONS_PER_STEP
) -> StepReport:
    """Step the most urgent due event, whichever event's wake-up brought the worker here.

    Wake-ups wait in the broker in the order they were sent; past capacity, serving each
    for its own event would make every event equally late. Each wake-up is therefore
    only a turn: it steps the due event nearest its ``act_by`` (``leases.take_most_urgent``).
    No event loses its turn: the one a wake-up was sent for is due, so until it is
    stepped every other due event that took a turn still has its own wake-up coming.
    With nothing due, the hinted event is looked at as ``step_event`` does: a wake-up that
    came early (its host's clock runs ahead) schedules the event's next one.
    """
    started = time.monotonic()
    taken = leases.take_most_urgent(owner, at=clock.pinned())
    if taken is None:
        return step_event(hint, transports=transports, clock=clock, owner=owner, max_actions=max_actions)
    read, lease = taken
    clock.sync(read.database_time, started, time.monotonic())
    return _leased_step(read, lease, transports, clock, started, max_actions)


def _leased_step(
    read: StepRead, lease: Lease, transports: Transports, clock: Clock, started: float, max_actions: int
) -> StepReport:
    """Act while actions are due, holding ``lease``; give the lease back with the next wake-up recorded."""
    event_id, loaded = read.event_id, read.loaded
    now = clock.now()
    step = Actions(event_id, lease, transports, clock, loaded._replace(lease_token=lease.token), read)
    ttl = loaded.policy.lease_ttl
    renew_after = now + ttl / 2
    done: list[NextAction] = []
    result = "done"
    wake_after: timedelta | None = None
    failure: Exception | None = None
    try:
        for _ in range(max_actions):
            decision = machine.decide(step.known.event, step.known.claims, step.known.policy, now)
            if not machine.due_now(decision, now):
                break
            needed = _lease_needed(decision.action)
            if now >= renew_after or step.lease_until - now < needed:
                # A step of several actions can outlast the lease, and a poll or a lookup can
                # take its call's whole bound: renew it between actions, and before such a call
                # for at least that call and the write after it, so that no other worker takes
                # over (and recovers, or polls again) an event still in hand.
                held_for = max(ttl, needed)
                if not leases.renew(event_id, lease, at=clock.pinned(), ttl=held_for):
                    raise Ended
                renew_after, step.lease_until = now + ttl / 2, now + held_for
            done.append(decision.action)
            step.act(decision.action, now)
            now = clock.now()
            if step.handed_back is not None:
                break  # its last write gave the lease back: nothing more is due now
        if not done:
            # Taken as due by the database's schedule, yet nothing is due: store what decide
            # says, or the event would be taken again by every wake-up until it is due.
            step.refresh_schedule(now)
        decision = machine.decide(step.known.event, step.known.claims, step.known.policy, now)
        wake_after = machine.wake_after(decision, now, loaded.policy.poll_interval)
    except Ended:
        # Whoever moved the event on schedules what follows; a re-check now costs one no-op.
        result, decision, wake_after = "ended", machine.NO_ACTION, timedelta(0)
    except (OperationalError, InterfaceError):
        raise  # the database failed the worker, not the event: the lease runs out, the sweeper goes on
    except Exception as error:
        # A fact about this event (a sealed entry that will not open, a template this worker
        # cannot render), not about the worker: contained on the event, not raised to the task.
        result, decision, failure = "failed", machine.NO_ACTION, error
    finally:
        handed = step.handed_back
        if failure is not None:
            wake_up = _back_off(read, lease, failure, clock.now())
        elif handed is None:
            # The lease goes back with the next wake-up recorded on the event, in one statement.
            if wake_after is None:
                leases.give_back(event_id, lease)
                wake_up = None
            else:
                wake_up = leases.give_back_with_wake_up(event_id, lease, wake_at=now + wake_after, now=now)
        else:
            wake_up = handed.wake_up  # the step's last write gave the lease back and sent it (``HandBack``)
        # A wake-up not sent (one no later is pending, or the lease was taken over): its holder schedules.
        wake_after = None if wake_up is None else max(wake_up.at - now, timedelta(0))
        if failure is None and read.step_failures:
            leases.clear_step_failures(event_id, lease)  # it completes again
    log.info(
        "step",
        extra={
            "event_id": event_id,
            "actions": [action.value for action in done],
            "result": result,
            "state": step.known.event.state,
            "version": step.known.version,
            "lease_owner": lease.owner,
            "next_action": decision.action.value,
            "duration_ms": round((time.monotonic() - started) * 1000, 1),
        },
    )
    return StepReport(event_id, result, tuple(done), decision.action, decision.due_at, wake_after, wake_up)


def _wake(event_id: str, now: datetime, wake_after: timedelta | None) -> WakeUp | None:
    """Send a wake-up ``wake_after`` from now (none for None), when no write of the step recorded one."""
    wake_up = None if wake_after is None else WakeUp(event_id, now + wake_after)
    send_after_commit(wake_up)
    return wake_up


def _lease_needed(action: NextAction) -> timedelta:
    """How much lease a worker must hold before ``action``: a poll's or a lookup's whole call and a
    margin to record its answer. A submit extends its lease itself, with its intent (``Actions._begin``)."""
    if action in (NextAction.POLL_SMS, NextAction.RECOVER_SMS):
        return call_bound(Channel.SMS) + settings.NOTIFY_LEASE_MARGIN
    return timedelta(0)


def step_backoff(failures: int) -> timedelta:
    """How long an event waits after ``failures`` steps in a row raised: doubling from
    NOTIFY_STEP_BACKOFF, at most NOTIFY_STEP_BACKOFF_MAX."""
    first: timedelta = settings.NOTIFY_STEP_BACKOFF
    longest: timedelta = settings.NOTIFY_STEP_BACKOFF_MAX
    return min(longest, first * (1 << min(failures - 1, 20)))


def _back_off(read: StepRead, lease: Lease, error: Exception, now: datetime) -> WakeUp | None:
    """Count a step that raised on its event and hold the event back; return the wake-up sent.

    Held at most until its expiry (expiring renders nothing); past it, the full backoff (never due at once).
    """
    failures, expires_at = read.step_failures + 1, read.loaded.event.expires_at
    retry_at = now + step_backoff(failures)
    retry_at = min(retry_at, expires_at) if now < expires_at else retry_at
    # The class and where it was raised, never the message: a message may quote personal data.
    where = traceback.extract_tb(error.__traceback__)[-1]
    log.error(
        "step_failed",
        extra={
            "event_id": read.event_id,
            "error": type(error).__name__,
            "where": f"{where.filename}:{where.lineno} in {where.name}",
            "failures": failures,
            "retry_at": retry_at.isoformat(),
        },
    )
    wake_up = leases.hold_back(read.event_id, lease, error=type(error).__name__, retry_at=retry_at, now=now)
    tallies.add_for_event(tallies.STEP_FAILURES, read.event_id)
    return wake_up
