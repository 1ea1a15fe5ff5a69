"""Running totals for ``/metrics``, kept in the database so every process's work counts.

Two ways in:
- ``add_for_event``: a process counts something only it sees (a duplicate claim it was refused)
  with one upsert; these are rare, so the row is never hot.
- ``roll_up``: a periodic task reads the append-only history (transitions, observations)
  past a watermark and adds what it finds (latencies into histogram buckets, expiries,
  late deliveries). One writer at a time (the watermark rows are locked), nothing
  counted twice, nothing added to the hot path of a transition.
"""

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction

from notify.models import Tally, TallyWatermark
from notify.rules import machine
from notify.rules.vocabulary import Effect, Normalized

SUPPRESSED_DUPLICATE_CLAIMS = "suppressed_duplicate_claims_total"
EXPIRED_WITHOUT_OUTCOME = "expired_without_outcome_total"
LATE_SMS_AFTER_FALLBACK = "late_sms_after_fallback_total"
LATE_SMS_ACCEPTANCES = "late_sms_acceptances_total"
FALLBACKS_WITHOUT_USEFUL_LIFE = "fallbacks_without_useful_life_total"
POSSIBLE_DUPLICATE_EMAILS = "possible_duplicate_emails_total"
CONFIGURATION_ERRORS = "configuration_errors_total"
PAGE_DELIVERY_FAILURES = "page_delivery_failures_total"
STEP_FAILURES = "step_failures_total"
OBSERVATIONS = "observations_total"
MESSAGES = "messages_total"
SMS_SEGMENTS = "sms_segments"
SMS_TERMINAL_SECONDS = "sms_terminal_seconds"
CLAIM_REMAINING_SECONDS = "fallback_claim_remaining_lifetime_seconds"
SWEEPER_LAST_RUN = "sweeper_last_run_timestamp_seconds"
ROLLUP_LAST_RUN = "rollup_last_run_timestamp_seconds"
EVALUATOR_LAST_RUN = "evaluator_last_run_timestamp_seconds"
OUTBOX_LAST_RUN = "outbox_last_run_timestamp_seconds"

# Histogram bucket upper bounds, in seconds. SMS receipts take seconds to minutes; a
# fallback claimed with under a minute of reset lifetime left is worth little.
BUCKETS: Mapping[str, Sequence[float]] = {
    SMS_TERMINAL_SECONDS: (1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
    CLAIM_REMAINING_SECONDS: (0, 30, 60, 120, 180, 300, 600, 900, 1800),
    # Segments an SMS is billed as: 1 is the goal, UCS-2 with a link is 2, more is a template to fix.
    SMS_SEGMENTS: (1, 2, 3, 4, 6, 8, 10),
}
# A tally's label when it carries two: "email/de", "de/2" (neither part contains a slash).
LABEL_SEPARATOR = "/"
# The locale label of messages worded from a policy's default templates.
DEFAULT_LOCALE_LABEL = "default"
BATCH = 5000
# Rows are counted once they are this old. A row's id is taken when it is inserted, not when
# it commits, so a row can become visible after one with a higher id; the watermark must not
# pass a row that may still appear. A transition commits within milliseconds of taking its
# id, a sweep stamps its expiries with the time it started and lasts seconds, and hosts keep
# their clocks in sync (NTP): half a minute is a wide margin for all three.
SETTLE = timedelta(seconds=30)
_SMS_TERMINAL = ("delivered", "terminal_failure", "rejected")
# machine.OUTCOME_EVIDENCE as SQL over an observation ``o`` (values from the enums, never from input).
_OUTCOME_EVIDENCE = " OR ".join(
    f"(o.channel = '{channel.value}' AND o.normalized = '{normalized.value}')"
    for channel, normalized in sorted(machine.OUTCOME_EVIDENCE)
)

_UPSERT = """
INSERT INTO notify_tally (name, region, label, value) VALUES (%s, %s, %s, %s)
ON CONFLICT (name, region, label) DO UPDATE SET value = notify_tally.value + excluded.value
"""
_UPSERT_FOR_EVENT = """
INSERT INTO notify_tally (name, region, label, value)
SELECT %s, region, %s, 1 FROM notify_event WHERE id = %s
ON CONFLICT (name, region, label) DO UPDATE SET value = notify_tally.value + excluded.value
"""


# What one roll-up adds, summed per tally row before anything is written: one upsert per
# row touched, not three per history row read.
Additions = defaultdict[tuple[str, str, str], float]


def _flush(additions: Additions) -> None:
    if additions:
        with connection.cursor() as cursor:
            cursor.executemany(_UPSERT, [[*key, amount] for key, amount in sorted(additions.items())])


def add_for_event(name: str, event_id: str, label: str = "") -> None:
    """Count one for the event's region (looked up in the same statement)."""
    with connection.cursor() as cursor:
        cursor.execute(_UPSERT_FOR_EVENT, [name, label, event_id])


def set_value(name: str, value: float, region: str = "", label: str = "") -> None:
    Tally.objects.update_or_create(name=name, region=region, label=label, defaults={"value": value})


def value_of(name: str, region: str = "", label: str = "") -> float | None:
    return Tally.objects.filter(name=name, region=region, label=label).values_list("value", flat=True).first()


def bucket_label(upper_bound: float) -> str:
    return "+Inf" if upper_bound == float("inf") else f"{upper_bound:g}"


def _observe(additions: Additions, name: str, region: str, value: float, times: int = 1, within: str = "") -> None:
    """Add ``times`` observations of ``value`` to a histogram: its bucket, the sum and the count.

    ``within``: the value of the histogram's label beside the region, if it has one."""
    prefix = f"{within}{LABEL_SEPARATOR}" if within else ""
    bound = next((le for le in BUCKETS[name] if value <= le), float("inf"))
    additions[(name, region, prefix + bucket_label(bound))] += times
    additions[(name, region, prefix + "sum")] += value * times
    additions[(name, region, prefix + "count")] += times


@dataclass(frozen=True)
class RolledUp:
    transitions: int
    observations: int


def roll_up(now: datetime) -> RolledUp:
    """Count what the history gained since the last roll-up.

    1. Lock both watermarks (a concurrent roll-up waits, then starts where this ends).
    2. Transitions past the mark: a fallback claim adds the reset's remaining lifetime
       to its histogram; an expiry counts as expired without outcome unless evidence of a
       channel's outcome had arrived by the link's expiry (``machine.OUTCOME_EVIDENCE``;
       evidence a writer that had lost the event kept does not count, it moved nothing).
       A creation (no from-state) is neither: an email-only event is created with its
       email claimed, which is its first channel, not a fallback.
    3. SMS observations past the mark that are the event's first terminal one: the time
       from the SMS intent (the event's creation) to it; a delivery after the email was
       claimed counts as a late SMS after a fallback.
    """
    with transaction.atomic():
        marks = {mark.source: mark for mark in _locked_watermarks()}
        cutoff = now - SETTLE
        additions: Additions = defaultdict(float)
        transitions = _roll_transitions(marks["transition"], cutoff, additions)
        observations = _roll_observations(marks["observation"], cutoff, additions)
        _flush(additions)
        for mark in marks.values():
            mark.save(update_fields=["last_id"])
        set_value(ROLLUP_LAST_RUN, now.timestamp())
    return RolledUp(transitions, observations)


def _locked_watermarks() -> list[TallyWatermark]:
    for source in ("transition", "observation"):
        TallyWatermark.objects.get_or_create(source=source)
    return list(TallyWatermark.objects.select_for_update().filter(source__in=("transition", "observation")))


def _rows(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def _aware(value: object) -> datetime:
    # SQLite hands back naive UTC; PostgreSQL aware values.
    assert isinstance(value, datetime)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _roll_transitions(mark: TallyWatermark, cutoff: datetime, additions: Additions) -> int:
    upper = _settled_end("notify_transition", "at", mark.last_id, cutoff)
    rows = _rows(
        f"""
        SELECT t.id, t.to_state, t.at, e.region, e.expires_at,
               EXISTS (SELECT 1 FROM notify_observation o
                       WHERE o.event_id = t.event_id AND o.recorded_at <= e.expires_at
                         AND o.effect <> '{Effect.CONFLICT.value}' AND ({_OUTCOME_EVIDENCE}))
        FROM notify_transition t JOIN notify_event e ON e.id = t.event_id
        WHERE t.id > %s AND t.id <= %s AND t.to_state IN ('email_claimed', 'expired') AND t.from_state <> ''
        ORDER BY t.id LIMIT {BATCH}
        """,
        [mark.last_id, upper],
    )
    for _, to_state, at, region, expires_at, has_outcome in rows:
        if to_state == "email_claimed":
            remaining = (_aware(expires_at) - _aware(at)).total_seconds()
            _observe(additions, CLAIM_REMAINING_SECONDS, str(region), remaining)
        elif not has_outcome:
            additions[(EXPIRED_WITHOUT_OUTCOME, str(region), "")] += 1
    mark.last_id = int(str(rows[-1][0])) if len(rows) == BATCH else upper
    return len(rows)


def _roll_effects(after_id: int, up_to_id: int, additions: Additions) -> None:
    """Every piece of evidence in the range the watermark just passed, by region and what it did."""
    for region, effect, count in _rows(
        """
        SELECT e.region, o.effect, count(*) FROM notify_observation o JOIN notify_event e ON e.id = o.event_id
        WHERE o.id > %s AND o.id <= %s GROUP BY e.region, o.effect
        """,
        [after_id, up_to_id],
    ):
        additions[(OBSERVATIONS, str(region), str(effect))] += int(count)


def _roll_messages(after_id: int, up_to_id: int, additions: Additions) -> None:
    """Messages the providers accepted in the range, by region, channel and the template set they
    were worded from; an SMS's segments into its histogram. A channel's first acceptance counts
    (a resend after an unknown outcome is the same message to the subscriber)."""
    for region, channel, locale, segments, count in _rows(
        f"""
        SELECT e.region, o.channel, e.message_locale, c.segments, count(*)
        FROM notify_observation o JOIN notify_event e ON e.id = o.event_id
             LEFT JOIN notify_claim c ON c.event_id = o.event_id AND c.channel = o.channel
        WHERE o.id > %s AND o.id <= %s AND o.normalized = '{Normalized.ACCEPTED.value}'
          AND NOT EXISTS (SELECT 1 FROM notify_observation p
                          WHERE p.event_id = o.event_id AND p.channel = o.channel
                            AND p.normalized = '{Normalized.ACCEPTED.value}' AND p.id < o.id)
        GROUP BY e.region, o.channel, e.message_locale, c.segments
        """,
        [after_id, up_to_id],
    ):
        label = str(locale) or DEFAULT_LOCALE_LABEL
        additions[(MESSAGES, str(region), f"{channel}{LABEL_SEPARATOR}{label}")] += int(count)
        if channel == "sms" and segments is not None:
            _observe(additions, SMS_SEGMENTS, str(region), int(segments), times=int(count), within=label)


def _roll_observations(mark: TallyWatermark, cutoff: datetime, additions: Additions) -> int:
    upper = _settled_end("notify_observation", "recorded_at", mark.last_id, cutoff)
    terminal = ", ".join(["%s"] * len(_SMS_TERMINAL))
    rows = _rows(
        f"""
        SELECT o.id, o.normalized, o.recorded_at, e.region, e.created_at,
               EXISTS (SELECT 1 FROM notify_observation p
                       WHERE p.event_id = o.event_id AND p.channel = 'sms' AND p.id < o.id
                         AND p.normalized IN ({terminal})),
               EXISTS (SELECT 1 FROM notify_claim c
                       WHERE c.event_id = o.event_id AND c.channel = 'email' AND c.created_at <= o.recorded_at)
        FROM notify_observation o JOIN notify_event e ON e.id = o.event_id
        WHERE o.id > %s AND o.id <= %s AND o.channel = 'sms' AND o.normalized IN ({terminal})
        ORDER BY o.id LIMIT {BATCH}
        """,
        [*_SMS_TERMINAL, mark.last_id, upper, *_SMS_TERMINAL],
    )
    for _, normalized, recorded_at, region, created_at, seen_before, after_fallback in rows:
        if seen_before:
            continue  # a repeated or out-of-order terminal receipt: the first one counted
        latency = (_aware(recorded_at) - _aware(created_at)).total_seconds()
        _observe(additions, SMS_TERMINAL_SECONDS, str(region), latency)
        if normalized == "delivered" and after_fallback:
            additions[(LATE_SMS_AFTER_FALLBACK, str(region), "")] += 1
    counted_after, mark.last_id = mark.last_id, int(str(rows[-1][0])) if len(rows) == BATCH else upper
    _roll_effects(counted_after, mark.last_id, additions)
    _roll_messages(counted_after, mark.last_id, additions)
    return len(rows)


def _settled_end(table: str, time_column: str, last_id: int, cutoff: datetime) -> int:
    """The highest id up to which every row is settled (older than the cutoff).

    Just before the first unsettled row past the mark, or the last settled row if there is
    none. Rows the roll-up does not count (other states, other channels) are passed over
    too, so they are not scanned again.
    """
    cutoff_param = connection.ops.adapt_datetimefield_value(cutoff)
    sql = f"SELECT MIN(CASE WHEN {time_column} > %s THEN id END), MAX(id) FROM {table} WHERE id > %s"
    first_unsettled, end = _rows(sql, [cutoff_param, last_id])[0]
    if first_unsettled is not None:
        return int(str(first_unsettled)) - 1
    return int(str(end)) if end is not None else last_id
