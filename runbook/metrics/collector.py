"""The domain's Prometheus metrics, read from the database when ``/metrics`` is scraped.

The worker runs in other processes, often on other hosts, than the web server that
serves ``/metrics``; counters in one process's memory would miss their work (and the
client library's multiprocess mode only shares files between processes of one host).
So every value here comes from the database: gauges from the open events themselves
(small partial indexes), counters and histograms from ``notify.Tally`` rows that the
roll-up task and the workers keep, and page counts and what the pager is still owed from
the ``Page`` rows. Labels are regions, states, channels, modes and page actions: never an
event id.
"""

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta

from django.db import DatabaseError
from django.db.models import Case, Count, Min, Q, Value, When
from django.db.models.functions import Coalesce
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from notify import tallies
from notify.models import Event, HostClock, Tally
from plumbing.clock import current_clock
from runbook.console import answers
from runbook.models import Page, PageMode
from runbook.paging import risk
from runbook.paging.pager import RESOLVE, TRIGGER

log = logging.getLogger("runbook.metrics")
PREFIX = "reset_delivery"

# Tallies exposed as counters: (tally name, metric help, the labels the tally's label becomes).
COUNTERS = [
    (tallies.SUPPRESSED_DUPLICATE_CLAIMS, "Second claims or submits of a channel refused by the guards.", ("channel",)),
    (tallies.EXPIRED_WITHOUT_OUTCOME, "Events that expired with no channel at a final outcome.", ()),
    (tallies.LATE_SMS_AFTER_FALLBACK, "SMS deliveries reported after the email fallback was claimed.", ()),
    (
        tallies.LATE_SMS_ACCEPTANCES,
        "SMS found to exist after the event gave up waiting for its unsettled submit and moved on.",
        (),
    ),
    (
        tallies.FALLBACKS_WITHOUT_USEFUL_LIFE,
        "Fallback emails not sent: the link had too little life left.",
        ("channel",),
    ),
    (
        tallies.POSSIBLE_DUPLICATE_EMAILS,
        "Email sends whose worker was lost mid-send: a resend may deliver a second copy.",
        ("channel",),
    ),
    (tallies.CONFIGURATION_ERRORS, "Provider calls refused for our credentials or account.", ("channel",)),
    (
        tallies.OBSERVATIONS,
        "Provider evidence recorded (receipts, submit and lookup outcomes), by what it did to its event.",
        ("effect",),
    ),
    (tallies.PAGE_DELIVERY_FAILURES, "Page messages the pager did not accept (each is retried).", ("action",)),
    (tallies.STEP_FAILURES, "Worker steps that raised, counted on their event, which backs off.", ()),
    (
        tallies.MESSAGES,
        "Messages the providers accepted, by channel and the policy's template set they were worded from "
        "(a locale, or default): a region's messages per reset, by language.",
        ("channel", "locale"),
    ),
]
# Histograms: (tally name, metric help, the labels beside the region).
HISTOGRAMS = [
    (tallies.SMS_TERMINAL_SECONDS, "Seconds from the SMS intent to its first terminal observation.", ()),
    (tallies.CLAIM_REMAINING_SECONDS, "Reset lifetime left, in seconds, when the email fallback was claimed.", ()),
    (
        tallies.SMS_SEGMENTS,
        "Segments each accepted SMS was sent (and billed) as, by the template set it was worded from: "
        "a region's SMS cost per reset.",
        ("locale",),
    ),
]
# The old name of smallest_action_budget_seconds, still emitted alongside it for one release
# (CHANGELOG.md), then removed: dashboards and alert rules read the new name.
DEPRECATED_SMALLEST_BUDGET = f"{PREFIX}_smallest_budget_seconds"
TIMESTAMPS = [
    (tallies.SWEEPER_LAST_RUN, "When the sweeper last ran (Unix time)."),
    (tallies.ROLLUP_LAST_RUN, "When the metrics roll-up last ran (Unix time)."),
    (tallies.EVALUATOR_LAST_RUN, "When the at-risk evaluation last ran (Unix time)."),
    (tallies.OUTBOX_LAST_RUN, "When page delivery last ran (Unix time)."),
]


class DeliveryCollector(Collector):
    def describe(self) -> Iterator[Metric]:
        """The metric names, without touching the database (the registry asks at registration)."""
        yield GaugeMetricFamily(f"{PREFIX}_metrics_database_up", "")
        for name in (
            "open_events",
            "oldest_state_age_seconds",
            "smallest_action_budget_seconds",
            "events_at_risk",
            "failing_events",
        ):
            yield GaugeMetricFamily(f"{PREFIX}_{name}", "")
        yield GaugeMetricFamily(DEPRECATED_SMALLEST_BUDGET, "")
        yield GaugeMetricFamily(f"{PREFIX}_overdue_events", "")
        yield GaugeMetricFamily(f"{PREFIX}_schedule_lag_seconds", "")
        yield GaugeMetricFamily(f"{PREFIX}_smallest_sms_budget_seconds", "")
        yield GaugeMetricFamily(f"{PREFIX}_host_clock_offset_seconds", "")
        for name, _, _ in COUNTERS:
            yield CounterMetricFamily(f"{PREFIX}_{name.removesuffix('_total')}", "")
        for name, _, _ in HISTOGRAMS:
            yield HistogramMetricFamily(f"{PREFIX}_{name}", "")
        for name, _ in TIMESTAMPS:
            yield GaugeMetricFamily(f"{PREFIX}_{name}", "")
        yield CounterMetricFamily(f"{PREFIX}_pages_sent", "")
        yield CounterMetricFamily(f"{PREFIX}_pages_observed", "")
        for name in ("pages_undelivered", "pages_failing", "pages_oldest_undelivered_age_seconds"):
            yield GaugeMetricFamily(f"{PREFIX}_{name}", "")

    def collect(self) -> Iterator[Metric]:
        healthy = GaugeMetricFamily(f"{PREFIX}_metrics_database_up", "1 if the metrics could be read.")
        try:
            metrics = list(self._collect(current_clock().now()))
        except DatabaseError:
            log.exception("metrics_unavailable")
            healthy.add_metric([], 0)
            yield healthy
            return
        healthy.add_metric([], 1)
        yield healthy
        yield from metrics

    def _collect(self, now: datetime) -> Iterator[Metric]:
        yield from _open_event_gauges(now)
        yield _at_risk(now)
        yield _failing()
        yield _overdue(now)
        yield from _schedule_lag(now)
        yield _clock_offsets(now)
        rows = list(Tally.objects.values_list("name", "region", "label", "value"))
        yield from _counters(rows)
        yield from _histograms(rows)
        yield from _timestamps(rows)
        yield from _page_counters()
        yield from _page_outbox(now)


def _open_event_gauges(now: datetime) -> Iterator[Metric]:
    # Open events only (act_by set): the partial indexes on open events serve this.
    by_state = (
        Event.objects.filter(act_by__isnull=False)
        .values("region", "state")
        .annotate(n=Count("*"), oldest=Min("state_entered_at"), tightest=Min("act_by"))
        .order_by()
    )
    labels = ["region", "state"]
    open_events = GaugeMetricFamily(f"{PREFIX}_open_events", "Open events.", labels=labels)
    age = GaugeMetricFamily(
        f"{PREFIX}_oldest_state_age_seconds", "Longest time an open event has been in its state.", labels=labels
    )
    action_budget = GaugeMetricFamily(
        f"{PREFIX}_smallest_action_budget_seconds",
        "Least action budget (act_by - now) of an open event.",
        labels=labels,
    )
    deprecated = GaugeMetricFamily(
        DEPRECATED_SMALLEST_BUDGET, "Deprecated: use reset_delivery_smallest_action_budget_seconds", labels=labels
    )
    for row in by_state:
        values = [row["region"], row["state"]]
        open_events.add_metric(values, row["n"])
        age.add_metric(values, (now - row["oldest"]).total_seconds())
        least = (row["tightest"] - now).total_seconds()
        action_budget.add_metric(values, least)
        deprecated.add_metric(values, least)
    yield from (open_events, age, action_budget, deprecated)


def _at_risk(now: datetime) -> Metric:
    gauge = GaugeMetricFamily(
        f"{PREFIX}_events_at_risk",
        "Pageable events whose action budget is within their policy's page margin.",
        labels=["region", "mode"],
    )
    for row in risk.pageable_events(now).values("region", "policy__alert_mode").annotate(n=Count("*")).order_by():
        gauge.add_metric([row["region"], row["policy__alert_mode"]], row["n"])
    return gauge


def _failing() -> Metric:
    gauge = GaugeMetricFamily(
        f"{PREFIX}_failing_events",
        "Open events whose worker step raised NOTIFY_FAILING_AFTER times in a row or more.",
        labels=["region"],
    )
    for row in Event.objects.failing().values("region").annotate(n=Count("*")).order_by():  # event_step_failures_idx
        gauge.add_metric([row["region"]], row["n"])
    return gauge


def _overdue(now: datetime) -> Metric:
    gauge = GaugeMetricFamily(
        f"{PREFIX}_overdue_events",
        "Open events whose next step is overdue by more than the sweeper should ever allow.",
        labels=["region"],
    )
    late = Event.objects.filter(next_action_at__lt=now - answers.stuck_after())  # event_open_due_idx
    for row in late.values("region").annotate(n=Count("*")).order_by():
        gauge.add_metric([row["region"]], row["n"])
    return gauge


def _schedule_lag(now: datetime) -> Iterator[Metric]:
    lag = GaugeMetricFamily(
        f"{PREFIX}_schedule_lag_seconds",
        "How long the oldest due step that no worker holds has waited (0: none is waiting).",
    )
    lag.add_metric([], answers.schedule_lag(now).total_seconds())
    yield lag
    smallest = answers.smallest_sms_budget()
    if smallest is not None:
        sms_budget = GaugeMetricFamily(
            f"{PREFIX}_smallest_sms_budget_seconds", "The shortest SMS budget of any published policy."
        )
        sms_budget.add_metric([], smallest.total_seconds())
        yield sms_budget


# A host that stopped reporting (it was shut down, or its processes are idle) drops out.
CLOCK_REPORT_WINDOW = timedelta(minutes=10)


def _clock_offsets(now: datetime) -> Metric:
    gauge = GaugeMetricFamily(
        f"{PREFIX}_host_clock_offset_seconds",
        "A host's wall clock minus the database's: the largest in its last report (deadlines use the database's).",
        labels=["host"],
    )
    recent = HostClock.objects.filter(measured_at__gte=now - CLOCK_REPORT_WINDOW).order_by("host")
    for host, offset in recent.values_list("host", "offset_seconds"):
        gauge.add_metric([host], offset)
    return gauge


def _counters(rows: list[tuple[str, str, str, float]]) -> Iterator[Metric]:
    for name, help_text, labels in COUNTERS:
        counter = CounterMetricFamily(f"{PREFIX}_{name.removesuffix('_total')}", help_text, labels=["region", *labels])
        for tally, region, tally_label, value in rows:
            if tally == name:
                counter.add_metric([region, *_split(tally_label, len(labels))], value)
        yield counter


def _histograms(rows: list[tuple[str, str, str, float]]) -> Iterator[Metric]:
    for name, help_text, labels in HISTOGRAMS:
        histogram = HistogramMetricFamily(f"{PREFIX}_{name}", help_text, labels=["region", *labels])
        by_series: dict[tuple[str, ...], dict[str, float]] = {}
        for tally, region, label, value in rows:
            if tally == name:
                *series, part = _split(label, len(labels) + 1)
                by_series.setdefault((region, *series), {})[part] = value
        for label_values, values in sorted(by_series.items()):
            # Stored per bucket; Prometheus wants each bucket to include the ones below it.
            cumulative, buckets = 0.0, []
            for le in [*tallies.BUCKETS[name], float("inf")]:
                cumulative += values.get(tallies.bucket_label(le), 0.0)
                # "le" as Prometheus writes it: 300.0, +Inf.
                buckets.append(("+Inf" if le == float("inf") else repr(float(le)), cumulative))
            histogram.add_metric(list(label_values), buckets, sum_value=values.get("sum", 0.0))
        yield histogram


def _split(label: str, parts: int) -> list[str]:
    """A tally's label as the ``parts`` label values it joins (none for a metric with no label)."""
    return label.split(tallies.LABEL_SEPARATOR, parts - 1) if parts else []


def _timestamps(rows: list[tuple[str, str, str, float]]) -> Iterator[Metric]:
    for name, help_text in TIMESTAMPS:
        gauge = GaugeMetricFamily(f"{PREFIX}_{name}", help_text)
        for tally, _, _, value in rows:
            if tally == name:
                gauge.add_metric([], value)
        yield gauge


def _page_counters() -> Iterator[Metric]:
    sent = CounterMetricFamily(f"{PREFIX}_pages_sent", "Pages delivered to the pager.", labels=["region"])
    observed = CounterMetricFamily(
        f"{PREFIX}_pages_observed", "Would-have-paged events recorded in observe mode.", labels=["region"]
    )
    counts = Page.objects.values("region").annotate(
        sent=Count("pk", filter=Q(mode=PageMode.PAGE, trigger_sent_at__isnull=False)),
        observed=Count("pk", filter=Q(mode=PageMode.OBSERVE)),
    )
    for row in counts.order_by():
        sent.add_metric([row["region"]], row["sent"])
        observed.add_metric([row["region"]], row["observed"])
    yield from (sent, observed)


def _page_outbox(now: datetime) -> Iterator[Metric]:
    """What the pager is still owed, per region and action, in one query over the outbox.

    A message is owed while ``next_attempt_at`` is set: a trigger while the event is open,
    the resolve once it has ended (``resolved_at``), owed since that moment.
    """
    owed = (
        Page.objects.filter(mode=PageMode.PAGE, next_attempt_at__isnull=False)  # page_outbox_idx
        .annotate(action=Case(When(resolved_at__isnull=True, then=Value(TRIGGER)), default=Value(RESOLVE)))
        .values("region", "action")
        .annotate(
            n=Count("pk"),
            failing=Count("pk", filter=~Q(last_error="")),
            since=Min(Coalesce("resolved_at", "opened_at")),
        )
        .order_by("region", "action")
    )
    labels = ["region", "action"]
    undelivered = GaugeMetricFamily(
        f"{PREFIX}_pages_undelivered", "Page messages (trigger, resolve) owed to the pager.", labels=labels
    )
    failing = GaugeMetricFamily(
        f"{PREFIX}_pages_failing", "Owed page messages whose last delivery attempt failed.", labels=labels
    )
    age = GaugeMetricFamily(
        f"{PREFIX}_pages_oldest_undelivered_age_seconds",
        "How long the oldest owed page message of a region has been owed (no sample when none is).",
        labels=["region"],
    )
    oldest: dict[str, datetime] = {}
    for row in owed:
        undelivered.add_metric([row["region"], row["action"]], row["n"])
        failing.add_metric([row["region"], row["action"]], row["failing"])
        oldest[row["region"]] = min(row["since"], oldest.get(row["region"], row["since"]))
    for region, since in oldest.items():
        age.add_metric([region], (now - since).total_seconds())
    yield from (undelivered, failing, age)
