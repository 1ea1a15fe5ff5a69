"""Pages arrive when the system is in trouble: real Celery workers on PostgreSQL and Redis.

A backlog of steps longer than the events' budget is exactly when budgets run out; the
at-risk evaluation and page delivery run on lanes of their own, so the backlog cannot
delay or discard them.
"""

from datetime import timedelta

import pytest

from config import lanes
from notify.models import Event
from runbook import page_audit
from runbook.models import Page
from tests.integration.processes import wait_for
from tests.integration.test_worker_processes import TERMINAL, fast_policy, scripted, seconds
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


def paging_env(receiver: Receiver) -> dict[str, str]:
    return {
        "NOTIFY_RISK_INTERVAL": str(RISK_INTERVAL),
        "PAGER_EVENTS_URL": receiver.url,
        "PAGER_ROUTING_KEYS": "US=routing-key-us",
        "PAGER_TIMEOUT": "1",
    }


def test_a_backlog_of_steps_longer_than_the_budget_pages_the_events_it_holds_within_the_interval(
    simulator, start_worker, receiver
):
    # SMS budget long enough that the first events keep to their slow SMS path while they wait.
    fast_policy(alert_mode="page", page_margin=PAGE_MARGIN, sms_budget=seconds(30))
    start_worker(beat=True, queues=lanes.LANE_QUEUES, **paging_env(receiver))
    # One step at a time, and each of the first events' submits answered after 1.5 s: about
    # 18 s of steps queue up ahead of the events created behind them, whose whole life is 12 s.
    start_worker(concurrency=1, queues=lanes.STEP_QUEUE, **paging_env(receiver))
    slow = [
        scripted(simulator, ttl=60, create=["hang"], statuses=[("delivered", 0.2)], hang_seconds=1.5) for _ in range(12)
    ]
    held = [scripted(simulator, ttl=12, statuses=[("delivered", 0.2)]) for _ in range(3)]

    def all_ended():
        states = Event.objects.filter(pk__in=[event.id for event in [*slow, *held]]).values_list("state", flat=True)
        return all(state in TERMINAL for state in states)

    wait_for(all_ended, timeout=90, message="every event to end")
    wait_for(
        lambda: (
            not Page.objects.filter(next_attempt_at__isnull=False).exists()
            and not Page.objects.filter(resolved_at__isnull=True, event__act_by__isnull=True).exists()
        ),
        timeout=20,
        message="every page message to be delivered",
    )

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
    assert page_audit.check(receiver.log, in_flight=timedelta(seconds=1)) == []
