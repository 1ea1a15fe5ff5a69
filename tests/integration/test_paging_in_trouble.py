"""Pages arrive when the system is in trouble: real Celery workers on PostgreSQL and Redis.

A backlog of steps longer than the events' budget is exactly when budgets run out; the
at-risk evaluation and page delivery run on lanes of their own, so the backlog cannot
delay or discard them.
"""

import time
from datetime import timedelta

import pytest

from config import lanes
from notify.models import Event, Transition
from notify.rules.vocabulary import State
from policies.models import ChannelPlan
from runbook.models import Page
from runbook.paging import invariants
from tests.integration.processes import wait_for
from tests.integration.test_worker_processes import TERMINAL, fast_policy, scripted, seconds, settled
from tests.runbook.pager_receiver import Receiver

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

RISK_INTERVAL = 1.0
PAGE_MARGIN = seconds(5)
# Beat's tick, the evaluation's own run and the commit: what "within the interval" allows on top.
SCHEDULING_SLACK = 1.0


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.stop()


def paging_env(pager_url: str) -> dict[str, str]:
    return {
        "NOTIFY_RISK_INTERVAL": str(RISK_INTERVAL),
        "PAGER_EVENTS_URL": pager_url,
        "PAGER_ROUTING_KEYS": "US=routing-key-us,EU=routing-key-eu",
        "PAGER_TIMEOUT": "1",
    }


def test_a_backlog_of_steps_longer_than_the_budget_pages_the_events_it_holds_within_the_interval(
    simulator, start_worker, receiver
):
    # Steps are served most urgent first, so the backlog that holds an event past its budget
    # is one of more urgent events. SMS budget long and fallback reserve short, so that the
    # urgent events keep to their slow SMS path for most of their life.
    fast_policy(alert_mode="page", page_margin=PAGE_MARGIN, sms_budget=seconds(30), fallback_reserve=seconds(1))
    start_worker(beat=True, queues=lanes.LANE_QUEUES, **paging_env(receiver.url))
    # One step at a time, and each urgent event's submit answered after 1.5 s: until their
    # fallback deadline 19 s in, the urgent events take every turn. The held events, a
    # second less urgent, go at risk 15 s in (act_by minus the margin) while they wait.
    start_worker(concurrency=1, queues=lanes.STEP_QUEUE, **paging_env(receiver.url))
    slow = [
        scripted(simulator, ttl=20, create=["hang"], statuses=[("delivered", 0.2)], hang_seconds=1.5) for _ in range(14)
    ]
    held = [scripted(simulator, ttl=21, statuses=[("delivered", 0.2)]) for _ in range(3)]

    def all_ended():
        states = Event.objects.filter(pk__in=[event.id for event in [*slow, *held]]).values_list("state", flat=True)
        return all(state in TERMINAL for state in states)

    wait_for(all_ended, timeout=90, message="every event to end")
    wait_for(invariants.outbox_drained, timeout=20, message="every page message to be delivered")

    pages = {page.event_id: page for page in Page.objects.all()}
    assert {event.id for event in held} <= pages.keys()  # each went at risk while its step waited
    for page in pages.values():
        # The page opened when the event had ``budget_seconds`` left; it went at risk at the margin.
        late = PAGE_MARGIN.total_seconds() - page.budget_seconds
        assert late <= RISK_INTERVAL + SCHEDULING_SLACK, f"{page.event_id} paged {late:.1f}s after going at risk"
    for received in receiver.log:
        if received.action == "trigger":
            opened = pages[received.dedup_key].opened_at
            assert received.at - opened < timedelta(seconds=RISK_INTERVAL + SCHEDULING_SLACK)
    assert invariants.check(receiver.log, in_flight=timedelta(seconds=1)) == []


def stand_in_log(simulator) -> list[invariants.Received]:
    return invariants.from_log(simulator.control.pager_log())


def test_a_pagerduty_outage_neither_slows_the_steps_nor_loses_duplicates_or_misplaces_a_page(
    simulator, start_worker, broker
):
    fast_policy()
    fast_policy(region="EU", channel_plan=ChannelPlan.SMS_ONLY, alert_mode="page", page_margin=PAGE_MARGIN)
    env = paging_env(f"{simulator.base_url}/v2/enqueue")
    start_worker(beat=True, queues=lanes.LANE_QUEUES, **env)
    start_worker(concurrency=2, queues=lanes.STEP_QUEUE, **env)
    settled(scripted(simulator, statuses=[("delivered", 0.2)]), timeout=30)  # both are up
    never_confirmed = [("sent", 0.2)]
    # SMS-only events in a paging region: each goes at risk 5.3 s before its expiry, while
    # polls remain. The outage runs from 5.5 s to 17.5 s: two events go at risk in its
    # timeouts and end in it (delivered, expired), one goes at risk in its 5xx and outlives
    # it, one goes at risk after it.
    ended_in_outage = [
        scripted(simulator, region="EU", ttl=12, statuses=never_confirmed),
        scripted(simulator, region="EU", ttl=12, statuses=[("sent", 0.2), ("delivered", 8.5)]),
    ]
    outlive_it = [scripted(simulator, region="EU", ttl=22, statuses=never_confirmed)]
    after_it = [scripted(simulator, region="EU", ttl=28, statuses=never_confirmed)]
    time.sleep(5.5)
    simulator.control.pager_outage(
        [
            {"mode": "timeout", "seconds": 4, "hang_seconds": 3},
            {"mode": "throttle", "seconds": 4, "retry_after": 1},
            {"mode": "error", "seconds": 4, "status": 503},
        ]
    )
    # Meanwhile resets keep coming in; their steps must not wait for the pager.
    during = []
    for _ in range(24):
        during.append(scripted(simulator, statuses=[("delivered", 0.2)]))
        time.sleep(0.5)
    settled(*ended_in_outage, *outlive_it, *after_it, *during, timeout=60)
    wait_for(invariants.outbox_drained, timeout=30, message="every page message to be delivered")

    for event in during:
        first_step = Transition.objects.filter(event_id=event.id, from_state=State.SMS_REQUESTED).earliest("at")
        assert first_step.at - event.created_at < timedelta(seconds=2), "a step waited for the pager"
    log = stand_in_log(simulator)
    assert {entry.status for entry in log} >= {0, 429, 503, 202}  # the outage was met
    accepted_triggers = {entry.dedup_key for entry in log if entry.action == "trigger" and entry.status == 202}
    missing = {event.id for event in [*outlive_it, *after_it]} - accepted_triggers
    assert not missing, (
        [(e.action, e.dedup_key[-6:], e.at.time(), e.status) for e in log if e.dedup_key in missing],
        list(Page.objects.filter(event__in=missing).values()),
        list(Event.objects.filter(pk__in=missing).values("created_at", "expires_at", "state", "state_entered_at")),
        [e.id for e in outlive_it],
    )
    assert Page.objects.filter(event__in=[event.id for event in ended_in_outage]).count() == len(ended_in_outage)
    # Once per still-open event, none after an event ended, every resolve landed.
    assert invariants.check(log, in_flight=timedelta(seconds=1)) == []
