"""A recommendation, not a guess: search one field's valid range for the value that meets every target
with the fewest extra messages.

Every candidate is the region's baseline policy with the field set, validated as a policy would
be, and replayed over the same records. The search is coarse, then fine: ``COARSE`` values
spread over the field's range, then ``FINE`` between the best one's neighbours, to the second.
Ties in extra messages go to fewer useless fallbacks, then fewer pages, then the value nearest
the baseline's (the smallest change that does the job).
"""

from collections.abc import Sequence
from dataclasses import dataclass

from policies.models import PolicyVersion
from runbook.replay import run
from runbook.replay.report import Candidate, Counts, Target
from runbook.replay.simulate import Shared, collector_paused, simulate
from runbook.replay.timings import Timing

SEARCHABLE = ("sms_budget", "fallback_reserve", "page_margin")
COARSE = 13
FINE = 9


@dataclass(frozen=True)
class Recommended:
    region: str
    field: str
    value: float | None  # seconds; None: no value in the range meets every target
    low: float
    high: float
    tried: dict[Candidate, Counts]  # baseline first, then every value tried, in order

    @property
    def counts(self) -> Counts | None:
        return None if self.value is None else self.tried[_candidate(self.field, self.value)]


def field_range(field: str, base: PolicyVersion, records: Sequence[Timing]) -> tuple[float, float]:
    """The values worth trying, in seconds: from the smallest valid one to where the field stops mattering."""
    longest = max(record.lifetime_s for record in records)
    if field == "fallback_reserve":
        # Must cover the email step (validation); beyond the longest lifetime, D is creation.
        low = (base.email_submit_cost + base.record_cost).total_seconds()
        return low, max(low, longest)
    if field == "sms_budget":
        # Beyond lifetime - reserve, D is set by the reserve and more budget changes nothing.
        return 1.0, max(1.0, longest - base.fallback_reserve.total_seconds())
    if field == "page_margin":
        return 1.0, max(1.0, longest)
    raise run.ReplayError(f"--recommend {field}: choose one of {', '.join(SEARCHABLE)}")


def recommend(field: str, base: PolicyVersion, records: Sequence[Timing], targets: Sequence[Target]) -> Recommended:
    if not targets:
        raise run.ReplayError("--recommend needs at least one --target to meet")
    low, high = field_range(field, base, records)
    tried: dict[Candidate, Counts] = {Candidate("baseline", ""): _replay(records, base)}
    coarse = _spread(low, high, COARSE)
    best = _best(field, base, records, targets, coarse, tried)
    if best is not None:
        step = (high - low) / (COARSE - 1) if COARSE > 1 else 0.0
        fine = _spread(max(low, best - step), min(high, best + step), FINE)
        best = _best(field, base, records, targets, fine, tried) or best
    baseline, *values = tried.items()
    ordered = dict([baseline, *sorted(values, key=lambda item: float(item[0].value))])
    return Recommended(base.region, field, best, low, high, ordered)


def _spread(low: float, high: float, count: int) -> list[float]:
    """``count`` values from ``low`` to ``high``, whole seconds (policies are written to the second)."""
    if high <= low:
        return [round(low)]
    return sorted({float(round(low + (high - low) * i / (count - 1))) for i in range(count)})


def _best(
    field: str,
    base: PolicyVersion,
    records: Sequence[Timing],
    targets: Sequence[Target],
    values: list[float],
    tried: dict[Candidate, Counts],
) -> float | None:
    baseline = getattr(base, field).total_seconds()
    meeting: list[tuple[tuple[int, int, int, float], float]] = []
    for value in values:
        candidate = _candidate(field, value)
        if candidate not in tried:
            policy = _policy(field, base, value)
            if policy is None:
                continue  # outside what validation allows: not in the range after all
            tried[candidate] = _replay(records, policy)
        counts = tried[candidate]
        if all(target.met(counts) for target in targets):
            key = (counts.extra_messages, counts.useless_fallbacks, counts.would_page, abs(value - baseline))
            meeting.append((key, value))
    return min(meeting)[1] if meeting else None


def _candidate(field: str, value: float) -> Candidate:
    return Candidate(field, f"{value:g}")


def _policy(field: str, base: PolicyVersion, value: float) -> PolicyVersion | None:
    try:
        [(_, _), (_, policy)] = run.candidates(base, run.Variation(field, [f"{value:g}"]))
    except run.ReplayError:
        return None
    return policy


def _replay(records: Sequence[Timing], policy: PolicyVersion) -> Counts:
    counts, shared = Counts(), Shared()
    with collector_paused():
        for record in records:
            counts.add(simulate(record, policy, shared))
    return counts


def summary(recommended: Recommended, targets: Sequence[Target]) -> str:
    """The recommendation in words, for report.md and the command's output."""
    wanted = "; ".join(str(target) for target in targets)
    span = f"{recommended.low:g}-{recommended.high:g} s"
    if recommended.value is None:
        return (
            f"{recommended.region}: no {recommended.field} in {span} meets every target ({wanted}); "
            f"{len(recommended.tried) - 1} values tried. Nothing recommended."
        )
    counts = recommended.counts
    assert counts is not None
    return (
        f"{recommended.region}: {recommended.field} = {recommended.value:g} s meets every target ({wanted}) "
        f"with the fewest extra messages: {counts.extra_messages} of {counts.events} events, "
        f"{counts.useless_fallbacks} useless fallbacks, {counts.would_page} would page "
        f"({len(recommended.tried) - 1} values tried in {span})."
    )
