"""/metrics after driving real events through the worker and the simulator: the values, not just names."""

from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from notify import tallies, transitions
from notify.models import Event, Transition
from notify.states import Cause, Channel, Normalized, Source, State
from runbook import risk
from tests.factories import PolicyVersionFactory
from tests.notify.workers import run_until_settled, scripted_event
from tests.runbook.events import event_in

pytestmark = pytest.mark.django_db(transaction=True)

NO_RECEIPT = (("sent", 0),)
METRICS_TOKEN = "test-only-metrics-token-for-the-scrapes"


@pytest.fixture(autouse=True)
def metrics_token(settings):
    settings.METRICS_TOKEN = METRICS_TOKEN


def scrape_text(client):
    """/metrics as Prometheus gets it, with the token its scrape config sends."""
    return client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}).content.decode()


def scrape(client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics, keyed by name and sorted labels."""
    text = scrape_text(client)
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def settle(clock):
    """Roll up what happened, as the beat task would once it has settled."""
    return tallies.roll_up(clock.now() + tallies.SETTLE + timedelta(seconds=1))


def test_worker_outcomes_show_up_as_counters_and_histograms(client, policy, clock, simulator, transports):
    delivered = scripted_event(simulator, clock)
    rejected = scripted_event(simulator, clock, create=("reject",), smtp=("accept",))
    silent = scripted_event(simulator, clock, statuses=NO_RECEIPT, smtp=("accept",))
    stranded = scripted_event(simulator, clock, statuses=NO_RECEIPT, email="")
    for event in (delivered, rejected, silent, stranded):
        run_until_settled(event.id, transports, clock)
    # The silent SMS is delivered after all, long after its fallback went out.
    transitions.record_receipt(
        silent.id,
        transitions.ObservationInput(Channel.SMS, Source.CALLBACK, Normalized.DELIVERED, raw_status="delivered"),
        now=clock.now(),
        actor="callback",
    )
    # A second worker asks for the email claim the first already made: refused, and counted.
    transitions.claim_email_fallback(rejected.id, now=clock.now(), actor="worker-2", cause=Cause.OBSERVATION)

    settle(clock)
    metrics = scrape(client)

    us = (("region", "US"),)
    assert Event.objects.get(pk=stranded.id).state == State.EXPIRED
    assert metrics[("reset_delivery_expired_without_outcome_total", us)] == 1
    assert metrics[("reset_delivery_late_sms_after_fallback_total", us)] == 1
    assert metrics[("reset_delivery_suppressed_duplicate_claims_total", (("channel", "email"), *us))] == 1
    # One terminal SMS observation each for the delivered, rejected and (late) silent SMS.
    assert metrics[("reset_delivery_sms_terminal_seconds_count", us)] == 3
    # Two fallbacks: the rejected one at once, the silent one at the fallback deadline.
    claims = Transition.objects.filter(to_state=State.EMAIL_CLAIMED).select_related("event")
    remaining = sorted((t.event.expires_at - t.at).total_seconds() for t in claims)
    assert metrics[("reset_delivery_fallback_claim_remaining_lifetime_seconds_count", us)] == 2
    assert metrics[("reset_delivery_fallback_claim_remaining_lifetime_seconds_sum", us)] == sum(remaining)
    assert remaining[0] == 540  # 600 s reset, claimed at the 60 s SMS budget
    assert metrics[("reset_delivery_fallback_claim_remaining_lifetime_seconds_bucket", (("le", "300.0"), *us))] == 0
    assert metrics[("reset_delivery_fallback_claim_remaining_lifetime_seconds_bucket", (("le", "600.0"), *us))] == 2


def test_rolling_up_twice_counts_nothing_twice(client, policy, clock, simulator, transports):
    event = scripted_event(simulator, clock, create=("reject",), smtp=("accept",))
    run_until_settled(event.id, transports, clock)
    assert settle(clock).transitions == 1
    assert settle(clock).transitions == 0
    count = ("reset_delivery_fallback_claim_remaining_lifetime_seconds_count", (("region", "US"),))
    assert scrape(client)[count] == 1


def test_a_roll_up_leaves_rows_that_may_still_be_committing_for_the_next(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock, create=("reject",), smtp=("accept",))
    run_until_settled(event.id, transports, clock)
    assert tallies.roll_up(clock.now()).transitions == 0  # too fresh to be sure nothing precedes them
    assert settle(clock).transitions == 1


def test_open_events_their_ages_budgets_and_risk_are_gauges(client, clock):
    PolicyVersionFactory.create(region="US", alert_mode="page")
    PolicyVersionFactory.create(region="EU", allowed_sms_country_codes=[44])
    event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    clock.advance(100)
    event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    event_in(State.SMS_FAILED, clock, ttl=timedelta(seconds=600), region="EU", phone="+447911123456")
    clock.advance(600 - 9 - 100 - 10)  # the first event has 10 s of budget left

    metrics = scrape(client)

    pending = (("region", "US"), ("state", "sms_pending"))
    assert metrics[("reset_delivery_open_events", pending)] == 2
    assert metrics[("reset_delivery_oldest_state_age_seconds", pending)] == 600 - 9 - 10
    assert metrics[("reset_delivery_smallest_budget_seconds", pending)] == 10
    assert metrics[("reset_delivery_open_events", (("region", "EU"), ("state", "sms_failed")))] == 1
    assert metrics[("reset_delivery_events_at_risk", (("mode", "page"), ("region", "US")))] == 1
    assert ("reset_delivery_events_at_risk", (("mode", "observe"), ("region", "EU"))) not in metrics
    # Everyone's next step is long overdue: no worker is running in this test.
    assert metrics[("reset_delivery_overdue_events", (("region", "US"),))] == 2


def test_pages_sent_and_observed_are_counted_per_region(client, clock, pager_receiver):
    from runbook import pager

    PolicyVersionFactory.create(region="US", alert_mode="page")
    PolicyVersionFactory.create(region="EU", allowed_sms_country_codes=[44])
    event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600), region="EU", phone="+447911123456")
    clock.advance(600 - 9 - 10)
    risk.evaluate(clock.now())
    pager.deliver_due(clock)

    metrics = scrape(client)

    assert metrics[("reset_delivery_pages_sent_total", (("region", "US"),))] == 1
    assert metrics[("reset_delivery_pages_observed_total", (("region", "EU"),))] == 1
    assert metrics[("reset_delivery_pages_sent_total", (("region", "EU"),))] == 0


def test_the_sweeper_heartbeat_is_exposed(client, db):
    from notify import tasks

    tasks.sweep()
    metrics = scrape(client)
    assert metrics[("reset_delivery_sweeper_last_run_timestamp_seconds", ())] > 0
    assert metrics[("reset_delivery_metrics_database_up", ())] == 1


def test_the_evaluator_and_the_outbox_record_their_heartbeats_only_once_they_ran(client, db):
    from runbook import tasks

    before = scrape(client)
    tasks.evaluate_risk()
    tasks.deliver_pages()
    after = scrape(client)

    for name in ("evaluator", "outbox"):
        assert (f"reset_delivery_{name}_last_run_timestamp_seconds", ()) not in before
        assert after[(f"reset_delivery_{name}_last_run_timestamp_seconds", ())] > 0


def test_no_metric_is_labelled_with_an_event(client, policy, clock):
    event = event_in(State.SMS_PENDING, clock)
    text = scrape_text(client)
    assert event.id not in text
