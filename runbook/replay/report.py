"""Counting replayed outcomes per region and candidate, and writing them out: table, report, plots."""

import csv
import re
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy

from runbook.replay.simulate import Replayed

COUNTED = [
    "extra_messages",
    "useless_fallbacks",
    "fallbacks_without_useful_life",
    "expired_without_outcome",
    "would_page",
    "pages_without_action",
]
SUMMARY_COLUMNS = [
    "region",
    "field",
    "value",
    "events",
    *COUNTED,
    "claim_remaining_p5_s",
    "claim_remaining_p50_s",
    "claim_remaining_p95_s",
    "sms_segments_per_reset",
]
_TARGET = re.compile(r"^(?P<metric>[a-z_]+)\s*<=\s*(?P<limit>[0-9.]+)(?P<percent>%?)$")


@dataclass(frozen=True)
class Candidate:
    field: str  # "baseline" when nothing is varied
    value: str  # as given on the command line (seconds for durations)


@dataclass(slots=True)
class Sent:
    """What one template set's records sent: the cost of a region's resets in one language."""

    events: int = 0
    sms: int = 0
    sms_segments: int = 0
    emails: int = 0


@dataclass
class Counts:
    events: int = 0
    extra_messages: int = 0
    useless_fallbacks: int = 0
    fallbacks_without_useful_life: int = 0
    expired_without_outcome: int = 0
    would_page: int = 0
    pages_without_action: int = 0
    sms_segments: int = 0
    claim_remaining: array = field(default_factory=lambda: array("d"))  # type: ignore[type-arg]
    by_locale: dict[str, Sent] = field(default_factory=dict)

    def add(self, outcome: Replayed) -> None:
        self.events += 1
        self.sms_segments += outcome.sms_segments
        sent = self.by_locale.get(outcome.locale) or self.by_locale.setdefault(outcome.locale, Sent())
        sent.events += 1
        sent.sms += outcome.sms_segments > 0
        sent.sms_segments += outcome.sms_segments
        sent.emails += outcome.email_accepted
        self.extra_messages += outcome.extra_message
        self.useless_fallbacks += outcome.useless_fallback
        self.fallbacks_without_useful_life += outcome.no_useful_life
        self.expired_without_outcome += outcome.expired_without_outcome
        self.would_page += outcome.paged
        self.pages_without_action += outcome.page_without_action
        if outcome.claim_remaining_s is not None:
            self.claim_remaining.append(outcome.claim_remaining_s)

    def percentiles(self) -> tuple[float, float, float] | None:
        if not self.claim_remaining:
            return None
        p5, p50, p95 = numpy.percentile(numpy.frombuffer(self.claim_remaining), [5, 50, 95])
        return float(p5), float(p50), float(p95)


def figures(counts: Counts) -> dict[str, float | None]:
    """The counts as plain figures (``SUMMARY_COLUMNS`` from ``events`` on), to store or show."""
    quantiles = counts.percentiles()
    spread: list[float | None] = [round(q, 1) for q in quantiles] if quantiles else [None, None, None]
    return {
        "events": counts.events,
        **{name: getattr(counts, name) for name in COUNTED},
        "claim_remaining_p5_s": spread[0],
        "claim_remaining_p50_s": spread[1],
        "claim_remaining_p95_s": spread[2],
        "sms_segments_per_reset": _per_reset(counts.sms_segments, counts.events),
    }


@dataclass(frozen=True)
class Target:
    """A limit a candidate must meet: a count, or a share of the region's events (``1%``)."""

    metric: str
    limit: float
    percent: bool

    @classmethod
    def parse(cls, text: str) -> "Target":
        match = _TARGET.match(text.strip())
        if match is None or match["metric"] not in COUNTED:
            raise ValueError(f"target {text!r}: use METRIC<=N or METRIC<=N%, METRIC one of {', '.join(COUNTED)}")
        return cls(match["metric"], float(match["limit"]), bool(match["percent"]))

    def met(self, counts: Counts) -> bool:
        value = getattr(counts, self.metric)
        if self.percent:
            return counts.events > 0 and 100 * value / counts.events <= self.limit
        return bool(value <= self.limit)

    def __str__(self) -> str:
        return f"{self.metric} <= {self.limit:g}{'%' if self.percent else ''}"


Results = dict[str, dict[Candidate, Counts]]  # region -> candidate -> counts


def write_summary(path: Path, results: Results) -> None:
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(SUMMARY_COLUMNS)
        for region, candidates in sorted(results.items()):
            for candidate, counts in candidates.items():
                quantiles = counts.percentiles()
                spread = [f"{q:.1f}" for q in quantiles] if quantiles else ["", "", ""]
                counted = [getattr(counts, name) for name in COUNTED]
                per_reset = _per_reset(counts.sms_segments, counts.events)
                writer.writerow([region, candidate.field, candidate.value, counts.events, *counted, *spread, per_reset])


def write_plots(directory: Path, results: Results) -> list[str]:
    """The trade-off curve and the remaining-lifetime distributions, one panel per region."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot

    regions = sorted(results)
    figure, axes = pyplot.subplots(1, len(regions), figsize=(6 * len(regions), 4.5), squeeze=False)
    for axis, region in zip(axes[0], regions, strict=True):
        candidates = list(results[region].items())
        useless = [_rate(counts.useless_fallbacks, counts) for _, counts in candidates]
        extra = [_rate(counts.extra_messages, counts) for _, counts in candidates]
        axis.plot(useless, extra, marker="o")
        for (candidate, _), x, y in zip(candidates, useless, extra, strict=True):
            axis.annotate(_label(candidate), (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
        axis.set_title(f"{region}: extra messages against useless fallbacks")
        axis.set_xlabel("useless fallbacks (% of events)")
        axis.set_ylabel("extra messages (% of events)")
        axis.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(directory / "tradeoff.png", dpi=110)
    pyplot.close(figure)

    figure, axes = pyplot.subplots(1, len(regions), figsize=(6 * len(regions), 4.5), squeeze=False)
    for axis, region in zip(axes[0], regions, strict=True):
        candidates = list(results[region].items())
        data = [_values(counts) for _, counts in candidates]
        axis.boxplot(data, whis=(5, 95), showfliers=False)
        axis.set_xticks(range(1, len(candidates) + 1), [_label(candidate) for candidate, _ in candidates], fontsize=8)
        axis.set_title(f"{region}: reset lifetime left at the fallback claim")
        axis.set_ylabel("seconds (box: p25-p75, whiskers: p5-p95)")
        axis.grid(True, axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(directory / "remaining_lifetime.png", dpi=110)
    pyplot.close(figure)
    return ["tradeoff.png", "remaining_lifetime.png"]


def write_report(
    path: Path,
    results: Results,
    *,
    source: str,
    baseline: str,
    targets: Sequence[Target],
    recommendations: Sequence[str] = (),
) -> None:
    lines = [
        "# Replay report",
        "",
        f"Timings: `{source}`. Baseline: {baseline}.",
        "Each record ran through the worker's own decisions on a simulated clock, once per candidate.",
        "",
    ]
    if recommendations:
        lines += ["## Recommendation", "", *(f"- {text}" for text in recommendations), ""]
    if targets:
        wanted = "; ".join(str(target) for target in targets)
        lines += [f"Targets: {wanted}. ✔ marks the candidates meeting all of them.", ""]
    else:
        lines += ["No targets were given (`--target`), so no candidate is marked: read the trade-off below.", ""]
    for region, candidates in sorted(results.items()):
        lines += [
            f"## {region}",
            "",
            "| candidate | events | extra messages | useless fallbacks | fallbacks without useful life "
            "| expired without outcome | would page | pages without action "
            "| lifetime left at claim p5 / p50 / p95 (s) | meets targets |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for candidate, counts in candidates.items():
            quantiles = counts.percentiles()
            spread = " / ".join(f"{q:.0f}" for q in quantiles) if quantiles else "no claims"
            meets = "✔" if targets and all(target.met(counts) for target in targets) else ""
            lines.append(
                f"| {_label(candidate)} | {counts.events} | {_share(counts.extra_messages, counts)} "
                f"| {_share(counts.useless_fallbacks, counts)} "
                f"| {_share(counts.fallbacks_without_useful_life, counts)} "
                f"| {_share(counts.expired_without_outcome, counts)} "
                f"| {_share(counts.would_page, counts)} | {counts.pages_without_action} | {spread} | {meets} |"
            )
        lines += ["", *_by_locale(next(iter(candidates.items()))), ""]
    lines += [
        "## Plots",
        "",
        "![Extra messages against useless fallbacks](tradeoff.png)",
        "",
        "![Reset lifetime left at the fallback claim](remaining_lifetime.png)",
        "",
        "Extra messages: the fallback went out and the SMS was delivered anyway (two valid messages). "
        "Useless fallbacks: emails claimed with less lifetime left than the email step costs (never sent). "
        "Fallbacks without useful life: emails not sent, or not sent again after a lost answer, "
        "because the link had less than the email step's cost left. "
        "Pages without action must be zero: a page is only sent while a step remains. "
        "Messages by template set: what each language's resets sent, and the SMS segments they were "
        "billed as (history from before segments were recorded counts one a message).",
        "",
    ]
    path.write_text("\n".join(lines), encoding="utf-8")


def _by_locale(candidate_counts: tuple[Candidate, Counts]) -> list[str]:
    """Messages and SMS segments by the template set the records were worded from, for one candidate."""
    candidate, counts = candidate_counts
    rows = [
        f"| {locale} | {sent.events} | {sent.sms} | {sent.sms_segments} "
        f"| {_per_reset(sent.sms_segments, sent.events):.2f} | {sent.emails} |"
        for locale, sent in sorted(counts.by_locale.items())
    ]
    return [
        f"Messages by template set ({_label(candidate)}):",
        "",
        "| template set | events | SMS sent | SMS segments | segments per reset | emails sent |",
        "|---|---|---|---|---|---|",
        *rows,
    ]


def _per_reset(value: int, events: int) -> float:
    return round(value / events, 3) if events else 0.0


def _values(counts: Counts) -> "numpy.typing.NDArray[numpy.float64]":
    # A candidate that claimed no fallback draws no box (not a made-up one at zero).
    return numpy.frombuffer(counts.claim_remaining) if counts.claim_remaining else numpy.array([])


def _label(candidate: Candidate) -> str:
    if candidate.field == "baseline" or not candidate.value:
        return candidate.field  # a named candidate (a projection's "US v3") stands for itself
    return f"{candidate.field}={candidate.value}"


def _rate(value: int, counts: Counts) -> float:
    return 100 * value / counts.events if counts.events else 0.0


def _share(value: int, counts: Counts) -> str:
    return f"{value} ({_rate(value, counts):.2f}%)"
