"""Replaying a timing file against candidate policies, and where the results go."""

import copy
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ValidationError

from policies.models import PolicyVersion, Stage
from runbook.replay import report, timings
from runbook.replay.report import Candidate, Counts, Results, Target
from runbook.replay.simulate import Shared, collector_paused, simulate

# Fields --vary accepts: those the replayed decisions read (durations in seconds). Lease and
# retention settings change nothing a replay can see, so they are refused, not ignored.
VARIABLE_FIELDS = (
    "sms_budget",
    "fallback_reserve",
    "page_margin",
    "poll_interval",
    "poll_cost",
    "select_cost",
    "email_submit_cost",
    "record_cost",
    "email_backoff",
    "email_attempt_limit",
)


class ReplayError(ValueError):
    """Input the replay cannot use; nothing has been written."""


@dataclass(frozen=True)
class Variation:
    field: str
    values: list[str]

    @classmethod
    def parse(cls, text: str) -> "Variation":
        name, _, values = text.partition("=")
        name = name.strip()
        if name not in VARIABLE_FIELDS:
            raise ReplayError(
                f"--vary {text}: {name!r} is not a policy field replay can vary ({', '.join(VARIABLE_FIELDS)})"
            )
        listed = [value.strip() for value in values.split(",") if value.strip()]
        if not listed:
            raise ReplayError(f"--vary {text}: give the candidate values, e.g. {name}=30,60,90")
        return cls(name, listed)


def baselines(regions: Iterable[str], version: int | None) -> dict[str, PolicyVersion]:
    """Each region's active policy, or its version ``version``."""
    found: dict[str, PolicyVersion] = {}
    for region in regions:
        if version is None:
            policy = PolicyVersion.objects.active_for(region)
        else:
            policy = PolicyVersion.objects.filter(region=region, number=version).first()
        if policy is None:
            which = "an active policy" if version is None else f"a policy version {version}"
            raise ReplayError(f"region {region} has no {which}")
        found[region] = policy
    return found


def candidates(base: PolicyVersion, variation: Variation | None) -> list[tuple[Candidate, PolicyVersion]]:
    """The baseline, then the base policy with the varied field set to each value, each checked
    as a policy would be: the trade-off is read against where the region stands today."""
    made: list[tuple[Candidate, PolicyVersion]] = [(Candidate("baseline", ""), base)]
    if variation is None:
        return made
    for raw in variation.values:
        policy = copy.copy(base)
        policy.pk, policy.status = None, Stage.DRAFT
        try:
            number = float(raw)
        except ValueError:
            raise ReplayError(f"--vary {variation.field}: {raw!r} is not a number") from None
        if variation.field == "email_attempt_limit":
            if number != int(number):
                raise ReplayError(f"--vary email_attempt_limit: {raw!r} is not a whole number")
            setattr(policy, variation.field, int(number))
        else:
            setattr(policy, variation.field, timedelta(seconds=number))
        try:
            policy.clean()
        except ValidationError as error:
            reasons = "; ".join(message for messages in error.message_dict.values() for message in messages)
            raise ReplayError(
                f"--vary {variation.field}={raw} makes an invalid {base.region} policy: {reasons}"
            ) from None
        made.append((Candidate(variation.field, raw), policy))
    return made


def scan(path: Path, region: str | None) -> Counter[str]:
    """Validate the whole file before anything runs; return the records per region to replay."""
    if not path.is_file():
        raise ReplayError(f"{path}: no such file")
    known = set(PolicyVersion.objects.values_list("region", flat=True))
    try:
        return Counter(t.region for t in timings.read(path, regions=known) if region is None or t.region == region)
    except timings.TimingError as error:
        raise ReplayError(str(error)) from None


def replay(
    path: Path,
    policies: dict[str, list[tuple[Candidate, PolicyVersion]]],
    *,
    region: str | None,
    progress: Callable[[Iterable[timings.Timing]], Iterable[timings.Timing]] = lambda records: records,
) -> Results:
    results: Results = {name: {candidate: Counts() for candidate, _ in listed} for name, listed in policies.items()}
    # Each region's policies with the counts they add to, paired once: looked up per record, a
    # candidate (a dataclass) hashed in Python on every one.
    runs = {name: [(results[name][candidate], policy) for candidate, policy in each] for name, each in policies.items()}
    shared = Shared()
    with collector_paused():
        for timing in progress(timings.read(path)):
            if region is not None and timing.region != region:
                continue
            for counts, policy in runs[timing.region]:
                counts.add(simulate(timing, policy, shared))
    return results


def write(
    out: Path,
    results: Results,
    *,
    source: str,
    baseline: str,
    targets: Sequence[Target],
    recommendations: Sequence[str] = (),
) -> list[Path]:
    """Write summary.csv, report.md and the plots into ``out``, all or nothing.

    Everything is made in a scratch directory next to ``out`` and moved in at the end, so
    a failure (a full disk, a plotting error) leaves ``out`` as it was.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".replay-", dir=out.parent))
    try:
        report.write_summary(scratch / "summary.csv", results)
        report.write_report(
            scratch / "report.md",
            results,
            source=source,
            baseline=baseline,
            targets=targets,
            recommendations=recommendations,
        )
        names = ["summary.csv", "report.md", *report.write_plots(scratch, results)]
        out.mkdir(exist_ok=True)
        for name in names:
            (scratch / name).replace(out / name)
        return [out / name for name in names]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
