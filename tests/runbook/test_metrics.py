"""/metrics after driving real events through the worker and the simulator: the values, not just names."""

from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from notify import tallies
from notify.models import Event, Transition
from notify.rules import plan
from notify.rules.vocabulary import Cause, Channel, Normalized, Source, State
from notify.writes import leases, moves
from policies.models import ChannelPlan
from runbook.metrics.collector import _page_outbox
from runbook.models import Page, PageMode
from runbook.paging import risk
from tests.factories import PolicyVersionFactory, new_event
from tests.notify.workers import run_until_settled, scripted_event
from tests.runbook.events import event_in

pytestmark = pytest.mark.django_db(transaction=True)

NO_RECEIPT = (("sent", 0),)
EFFECTS = ("applied", "recorded", "late", "conflict")
# Evidence by what it did to its event, for the four events of the first test.
EFFECTS_SEEN = {"applied": 7.0, "recorded": 57.0, "late": 1.0, "conflict": None}
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
    moves.record_receipt(
        silent.id,
        plan.ObservationInput(Channel.SMS, Source.CALLBACK, Normalized.DELIVERED, raw_status="delivered"),
        now=clock.now(),
        actor="callback",
    )
    # A second worker asks for the email claim the first already made: refused, and counted.
    moves.claim_email_fallback(rejected.id, now=clock.now(), actor="worker-2", cause=Cause.OBSERVATION)

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
    # Every piece of evidence by what it did: the silent SMS's delivery came after its fallback.
    observations = "reset_delivery_observations_total"
    effects = {effect: metrics.get((observations, (("effect", effect), *us))) for effect in EFFECTS}
    assert effects == EFFECTS_SEEN


@pytest.mark.parametrize("after_expiry_s", [10, 60, 2700])
def test_a_receipt_after_expiry_does_not_clear_an_expiry_without_outcome(
    client, policy, clock, simulator, transports, after_expiry_s
):
    # Judged at the link's expiry, whenever the roll-up runs and whenever the receipt came after it.
    stranded = scripted_event(simulator, clock, statuses=NO_RECEIPT, email="")
    run_until_settled(stranded.id, transports, clock)
    expired = Event.objects.get(pk=stranded.id)
    assert expired.state == State.EXPIRED
    clock.advance((expired.expires_at - clock.now()).total_seconds() + after_expiry_s)
    moves.record_receipt(
        stranded.id,
        plan.ObservationInput(Channel.SMS, Source.CALLBACK, Normalized.DELIVERED, raw_status="delivered"),
        now=clock.now(),
        actor="callback",
    )

    settle(clock)

    assert scrape(client)[("reset_delivery_expired_without_outcome_total", (("region", "US"),))] == 1


def test_an_outcome_by_expiry_is_no_expiry_without_outcome(client, clock, simulator, transports):
    # The SMS is refused at once; the relay defers every email until the link expires. The
    # event expires, but with the SMS's failure on record before expiry: that is an outcome.
    PolicyVersionFactory.create(email_attempt_limit=50, email_backoff=timedelta(seconds=30))
    refused = scripted_event(simulator, clock, create=("reject",), smtp=("temp_fail",) * 50)
    run_until_settled(refused.id, transports, clock)
    assert Event.objects.get(pk=refused.id).state == State.EXPIRED
    settle(clock)
    assert scrape(client).get(("reset_delivery_expired_without_outcome_total", (("region", "US"),)), 0) == 0


def test_rolling_up_twice_counts_nothing_twice(client, policy, clock, simulator, transports):
    event = scripted_event(simulator, clock, create=("reject",), smtp=("accept",))
    run_until_settled(event.id, transports, clock)
    assert settle(clock).transitions == 1
    assert settle(clock).transitions == 0
    count = ("reset_delivery_fallback_claim_remaining_lifetime_seconds_count", (("region", "US"),))
    assert scrape(client)[count] == 1


def test_an_event_created_on_its_email_is_no_fallback_claim(client, clock):
    # Email-only policy: the event is created in email_claimed; that is its first channel,
    # not a fallback, and must not count in the fallback histogram (nor the late-fallback
    # alert's denominator, its count).
    PolicyVersionFactory.create(channel_plan=ChannelPlan.EMAIL_ONLY)
    event = new_event(clock.now())
    assert Transition.objects.get(event=event).to_state == State.EMAIL_CLAIMED

    settle(clock)

    count = ("reset_delivery_fallback_claim_remaining_lifetime_seconds_count", (("region", "US"),))
    assert scrape(client).get(count, 0) == 0


def test_a_roll_up_leaves_rows_that_may_still_be_committing_for_the_next(policy, clock, simulator, transports):
    event = scripted_event(simulator, clock, create=("reject",), smtp=("accept",))
    run_until_settled(event.id, transports, clock)
    assert tallies.roll_up(clock.now()).transitions == 0  # too fresh to be sure nothing precedes them
    assert settle(clock).transitions == 1


def test_open_events_their_ages_action_budgets_and_risk_are_gauges(client, clock):
    PolicyVersionFactory.create(region="US", alert_mode="page")
    PolicyVersionFactory.create(region="EU", allowed_sms_country_codes=[44])
    event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    clock.advance(100)
    event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    event_in(State.SMS_FAILED, clock, ttl=timedelta(seconds=600), region="EU", phone="+447911123456")
    clock.advance(600 - 9 - 100 - 10)  # the first event has 10 s of action budget left

    metrics = scrape(client)

    pending = (("region", "US"), ("state", "sms_pending"))
    assert metrics[("reset_delivery_open_events", pending)] == 2
    assert metrics[("reset_delivery_oldest_state_age_seconds", pending)] == 600 - 9 - 10
    assert metrics[("reset_delivery_smallest_action_budget_seconds", pending)] == 10
    assert metrics[("reset_delivery_open_events", (("region", "EU"), ("state", "sms_failed")))] == 1
    assert metrics[("reset_delivery_events_at_risk", (("mode", "page"), ("region", "US")))] == 1
    assert ("reset_delivery_events_at_risk", (("mode", "observe"), ("region", "EU"))) not in metrics
    # Everyone's next step is long overdue: no worker is running in this test.
    assert metrics[("reset_delivery_overdue_events", (("region", "US"),))] == 2


def test_the_old_name_of_the_smallest_action_budget_is_still_emitted_for_one_release(client, policy, clock):
    event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    clock.advance(100)

    text = scrape_text(client)
    metrics = scrape(client)

    pending = (("region", "US"), ("state", "sms_pending"))
    new = metrics[("reset_delivery_smallest_action_budget_seconds", pending)]
    assert metrics[("reset_delivery_smallest_budget_seconds", pending)] == new
    assert (
        "# HELP reset_delivery_smallest_budget_seconds "
        "Deprecated: use reset_delivery_smallest_action_budget_seconds" in text
    )


def test_the_schedule_lag_is_the_wait_of_the_oldest_due_step_no_worker_holds(client, clock):
    PolicyVersionFactory.create(region="US", sms_budget=timedelta(seconds=90))
    PolicyVersionFactory.create(region="EU", allowed_sms_country_codes=[44], sms_budget=timedelta(seconds=45))
    held = event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    clock.advance(5)
    waiting = new_event(clock.now())  # its submit falls due now
    clock.advance(3)
    before_the_hold = scrape(client)
    leases.take(held.id, "worker:1", at=clock.now(), ttl=timedelta(seconds=60))
    leases.take(waiting.id, "worker:2", at=clock.now(), ttl=timedelta(seconds=60))

    held_by_workers = scrape(client)

    assert before_the_hold[("reset_delivery_schedule_lag_seconds", ())] == 3
    assert held_by_workers[("reset_delivery_schedule_lag_seconds", ())] == 0
    assert held_by_workers[("reset_delivery_smallest_sms_budget_seconds", ())] == 45


def test_pages_sent_and_observed_are_counted_per_region(client, clock, pager_receiver):
    from runbook.paging import pager

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


OUTBOX_GAUGES = (
    "reset_delivery_pages_undelivered",
    "reset_delivery_pages_failing",
    "reset_delivery_pages_oldest_undelivered_age_seconds",
)


def _labels(**labels):
    return tuple(sorted(labels.items()))


def paging_page(clock, *, opened_ago, resolved_ago=None, last_error="", owed=True, region="US", **event_fields):
    """A page in page mode; ``owed``: it still owes the pager its trigger, or its resolve once resolved."""
    now = clock.now()
    opened_at = now - timedelta(seconds=opened_ago)
    owes_trigger = owed and resolved_ago is None
    return Page.objects.create(
        event=new_event(now, region=region, **event_fields),
        region=region,
        mode=PageMode.PAGE,
        opened_at=opened_at,
        state=State.SMS_PENDING,
        next_action="poll_sms",
        budget_seconds=20,
        resolved_at=None if resolved_ago is None else now - timedelta(seconds=resolved_ago),
        trigger_sent_at=None if owes_trigger else opened_at,
        next_attempt_at=now if owed else None,
        last_error=last_error,
    )


def test_owed_page_messages_are_counted_per_region_and_action_and_aged_from_when_they_were_owed(client, clock):
    PolicyVersionFactory.create(region="US", alert_mode="page")
    PolicyVersionFactory.create(region="EU", alert_mode="page", allowed_sms_country_codes=[44])
    paging_page(clock, opened_ago=50, last_error="pager answered 503")
    paging_page(clock, opened_ago=40, last_error="ConnectTimeout reaching the pager")
    paging_page(clock, opened_ago=20)  # not tried yet: owed, not failing
    # A resolve is owed since the event ended, not since the page opened.
    paging_page(clock, opened_ago=300, resolved_ago=90)
    paging_page(clock, opened_ago=200, resolved_ago=10, last_error="pager answered 500")
    # Delivered long ago: owes nothing, so its age counts for nothing.
    paging_page(clock, opened_ago=900, owed=False)
    paging_page(clock, opened_ago=600, owed=False, region="EU", phone="+447911123456")

    metrics = scrape(client)

    assert metrics[("reset_delivery_pages_undelivered", _labels(region="US", action="trigger"))] == 3
    assert metrics[("reset_delivery_pages_failing", _labels(region="US", action="trigger"))] == 2
    assert metrics[("reset_delivery_pages_undelivered", _labels(region="US", action="resolve"))] == 2
    assert metrics[("reset_delivery_pages_failing", _labels(region="US", action="resolve"))] == 1
    assert metrics[("reset_delivery_pages_oldest_undelivered_age_seconds", _labels(region="US"))] == 90
    assert [key for key in metrics if key[0] in OUTBOX_GAUGES and ("region", "EU") in key[1]] == []


def test_the_outbox_gauges_take_one_query(clock, django_assert_num_queries):
    PolicyVersionFactory.create(region="US", alert_mode="page")
    paging_page(clock, opened_ago=50)
    paging_page(clock, opened_ago=30, resolved_ago=5)
    with django_assert_num_queries(1):
        families = list(_page_outbox(clock.now()))
    assert [len(family.samples) for family in families] == [2, 2, 1]


def test_a_failing_pager_shows_as_an_ageing_failing_trigger_until_it_lands(client, clock, pager_receiver):
    from runbook.paging import pager

    PolicyVersionFactory.create(region="US", alert_mode="page")
    PolicyVersionFactory.create(region="EU", allowed_sms_country_codes=[44])  # observe: owes the pager nothing
    event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600))
    event_in(State.SMS_PENDING, clock, ttl=timedelta(seconds=600), region="EU", phone="+447911123456")
    clock.advance(600 - 9 - 29)  # 29 s of budget: within the 30 s margin
    risk.evaluate(clock.now())
    pager_receiver.status = 503
    pager.deliver_due(clock)
    clock.advance(20)  # still before expiry, so the trigger is still owed

    failing = scrape(client)

    trigger = _labels(region="US", action="trigger")
    assert failing[("reset_delivery_pages_undelivered", trigger)] == 1
    assert failing[("reset_delivery_pages_failing", trigger)] == 1
    assert failing[("reset_delivery_pages_oldest_undelivered_age_seconds", _labels(region="US"))] == 20
    assert [key for key in failing if key[0] in OUTBOX_GAUGES and ("region", "EU") in key[1]] == []
    assert failing[("reset_delivery_page_delivery_failures_total", trigger)] == 1

    pager_receiver.status = 202
    pager.deliver_due(clock)
    landed = scrape(client)

    assert pager_receiver.actions() == [("trigger", Page.objects.get(region="US").event_id)]
    assert [key for key in landed if key[0] in OUTBOX_GAUGES] == []


def test_failed_page_deliveries_are_counted_per_region_and_action(client, clock):
    PolicyVersionFactory.create(region="US", alert_mode="page")
    event = new_event(clock.now())
    for action in ("trigger", "trigger", "resolve"):
        tallies.add_for_event(tallies.PAGE_DELIVERY_FAILURES, event.id, label=action)

    metrics = scrape(client)

    failures = "reset_delivery_page_delivery_failures_total"
    assert metrics[(failures, _labels(region="US", action="trigger"))] == 2
    assert metrics[(failures, _labels(region="US", action="resolve"))] == 1


def test_messages_and_sms_segments_are_exposed_by_region_channel_and_locale(client, db):
    for label, value in (("de/1", 3), ("de/2", 1), ("de/sum", 5), ("de/count", 4), ("el/2", 2), ("el/sum", 4)):
        tallies.set_value(tallies.SMS_SEGMENTS, value, region="EU", label=label)
    tallies.set_value(tallies.MESSAGES, 4, region="EU", label="sms/de")
    tallies.set_value(tallies.MESSAGES, 1, region="EU", label="email/default")

    metrics = scrape(client)

    def segments(sample: str, locale: str, **labels: str) -> float:
        return metrics[(f"reset_delivery_sms_segments_{sample}", _labels(locale=locale, region="EU", **labels))]

    assert segments("bucket", "de", le="1.0") == 3
    assert segments("bucket", "de", le="2.0") == segments("bucket", "de", le="+Inf") == 4
    assert (segments("sum", "de"), segments("count", "de")) == (5, 4)
    assert segments("bucket", "el", le="1.0") == 0
    assert segments("bucket", "el", le="2.0") == 2
    messages = "reset_delivery_messages_total"
    assert metrics[(messages, _labels(channel="sms", locale="de", region="EU"))] == 4
    assert metrics[(messages, _labels(channel="email", locale="default", region="EU"))] == 1
