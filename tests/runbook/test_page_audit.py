"""The paging audit dates an event's end by when the database could know it, not only by its observation.

The chaos run's finding (RabbitMQ run, ``trigger_after_end``, "trigger arrived 11.3s after the
end"): a step worker read the time of the relay's acceptance of the fallback email and was
stopped (the run's step backlog: SIGSTOP, 15 s) before its write landed. For those 15 s the
database had the event open and past its budget, so the deliverer rightly triggered a page;
the write then landed dated by the observation, and the audit, reading ``state_entered_at``
as the end, called the trigger 11 s late.
"""

import threading
from datetime import timedelta

import pytest
from django.db import connection

from bench import chaos_paging
from bench.chaos_paging import Backlog
from notify.rules import plan
from notify.rules.vocabulary import Channel, Normalized, Source, State
from notify.writes import moves
from runbook.paging import invariants, pager, risk
from simulator.pager_state import PagerLogEntry
from tests.conftest import T0
from tests.factories import PolicyVersionFactory
from tests.runbook.events import WORKER, event_in

# The factory policy: page margin 30 s; once the email is claimed its remaining steps cost 6 s.
IN_FLIGHT = timedelta(seconds=chaos_paging.PAGER_TIMEOUT_SECONDS + 1)  # as the chaos verdict allows


@pytest.fixture
def paging_policy(db):
    return PolicyVersionFactory.create(alert_mode="page")


@pytest.mark.postgres  # two connections, each seeing the other's commits
@pytest.mark.django_db(transaction=True)
def test_the_outbox_is_not_drained_while_a_resolve_commits_during_the_check(paging_policy, clock, pager_receiver):
    # Found in make test (test_paging_in_trouble): three "unresolved_page", the ended events'
    # resolves never sent because the test stopped waiting. The check read its two questions
    # in two statements: "anything due?" (no: the triggers had landed) and then "any ended
    # event's page unresolved?" (no: the evaluator had just resolved them, and made them due
    # in between). Here the evaluator's resolve commits, on its own connection, between the
    # check's statements.
    event = event_in(State.EMAIL_CLAIMED, clock, ttl=timedelta(seconds=600))
    clock.advance(600 - 6 - 20)  # 20 s of budget: at risk
    assert risk.evaluate(clock.now()).opened == 1
    assert pager.deliver_due(clock).sent == 1  # its trigger landed; nothing is due
    accepted = plan.ObservationInput(Channel.EMAIL, Source.SUBMIT, Normalized.ACCEPTED, raw_status="smtp_250")
    assert moves.record_receipt(event.id, accepted, now=clock.now(), actor=WORKER).applied  # it ended

    def resolve_after_the_first_statement(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if not resolved:
            evaluator = threading.Thread(target=evaluate_resolves)
            evaluator.start()
            evaluator.join()
        return result

    def evaluate_resolves():
        try:
            resolved.append(risk.resolve(clock.now()))
        finally:
            connection.close()  # this thread's own

    resolved: list[int] = []
    with connection.execute_wrapper(resolve_after_the_first_statement):
        drained = invariants.outbox_drained()

    assert resolved == [1]
    assert not drained  # the resolve is owed, and due


def _as_stand_in_logged(receiver) -> list[PagerLogEntry]:
    return [
        PagerLogEntry(
            action=message.action,
            dedup_key=message.dedup_key,
            at=message.at.isoformat(),
            status=message.status,
            outcome="accepted" if message.status == 202 else "error",
        )
        for message in receiver.log
    ]


def _acceptance_held_by_a_stopped_worker(clock, pager_receiver):
    """The finding's history: the acceptance observed, the worker stopped 15 s, a trigger 11 s in."""
    event = event_in(State.EMAIL_CLAIMED, clock, ttl=timedelta(seconds=600))
    clock.advance(600 - 6 - 31)  # 31 s of budget: not yet at risk
    observed = clock.now()  # the worker reads the time of the relay's 250 ...
    accepted = plan.ObservationInput(Channel.EMAIL, Source.SUBMIT, Normalized.ACCEPTED, raw_status="smtp_250")
    backlog = Backlog(observed)  # ... and is stopped before its write lands
    clock.advance(2)
    assert risk.evaluate(clock.now()).opened == 1  # open in the database, and now at risk
    pager_receiver.status = 503  # the pager's outage: the trigger is retried
    pager.deliver_due(clock)
    clock.advance(9)
    pager_receiver.status = 202
    assert pager.deliver_due(clock).sent == 1  # the trigger lands, 11 s after the observation
    clock.advance(4)
    backlog.ended = clock.now()  # the worker runs again: its write lands, dated by its observation
    assert moves.record_receipt(event.id, accepted, now=observed, actor=WORKER).applied
    assert risk.evaluate(clock.now()).resolved == 1
    pager.deliver_due(clock)
    assert [action for action, _ in pager_receiver.actions()] == ["trigger", "resolve"]
    return event, backlog


def test_a_trigger_for_an_end_a_stopped_worker_still_held_is_not_late(paging_policy, clock, pager_receiver):
    event, backlog = _acceptance_held_by_a_stopped_worker(clock, pager_receiver)
    event.refresh_from_db()
    assert event.state == State.EMAIL_ACCEPTED
    assert backlog.started == event.state_entered_at  # the end is dated inside the backlog

    _, violations = chaos_paging.verdict([event.id], _as_stand_in_logged(pager_receiver), [backlog])

    assert [violation for violation in violations if violation["kind"] == "trigger_after_end"] == []


def test_a_trigger_after_the_held_end_landed_is_still_late(paging_policy, clock, pager_receiver):
    event, backlog = _acceptance_held_by_a_stopped_worker(clock, pager_receiver)
    late = invariants.Received("trigger", event.id, backlog.ended + IN_FLIGHT + timedelta(seconds=1), 202)

    found = invariants.check([*pager_receiver.log, late], in_flight=IN_FLIGHT, stalls=[backlog.span()])

    assert [(violation.kind, violation.detail) for violation in found] == [
        ("duplicate_trigger", "2 triggers accepted"),
        ("trigger_after_end", "trigger arrived 3.0s after the end"),  # counted from the stall's end
    ]


def test_an_end_in_a_stall_counts_from_the_stall_end_or_the_resolve_whichever_came_first():
    stall = (T0, T0 + timedelta(seconds=15))

    def known(observed: float, resolved: float | None) -> float:
        at = invariants.end_known_at(
            T0 + timedelta(seconds=observed),
            None if resolved is None else T0 + timedelta(seconds=resolved),
            [stall],
            IN_FLIGHT,
        )
        return (at - T0).total_seconds()

    assert known(0.5, 15.2) == 15  # held by a stopped worker: lands as the stall ends
    assert known(-0.1, 15.2) == 15  # observed a moment before the stop, not yet written
    # Written by a process that was not stopped (the sweeper, a callback): the evaluator saw it at once.
    assert known(4, 5) == 5
    assert known(4, None) == 15  # no resolve to go by: the stall's end
    assert known(-3, 15.2) == -3  # well before the stall, and after it: its own time
    assert known(16, 16.5) == 16
