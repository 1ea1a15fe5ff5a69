from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from tqdm import tqdm

from runbook.models import Recommendation
from runbook.replay import recommend, report, run, timings
from runbook.replay.report import Target


class Command(BaseCommand):
    help = (
        "Replay de-identified reset timings (docs/replay.md) through the worker's decisions on a simulated "
        "clock, per region and candidate policy value, and write report.md, summary.csv and plots."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("timings", type=Path, help="CSV in the timing format")
        parser.add_argument("--region", help="replay only this region's records")
        parser.add_argument(
            "--policy-version", type=int, help="baseline version number (default: each region's active one)"
        )
        parser.add_argument(
            "--vary", help="FIELD=v1,v2,...: candidate values of one policy field (durations in seconds)"
        )
        parser.add_argument(
            "--recommend",
            metavar="FIELD",
            help=f"search FIELD's valid range ({', '.join(recommend.SEARCHABLE)}) for the value meeting every "
            "--target with the fewest extra messages; kept for the admin's 'draft from recommendation'",
        )
        parser.add_argument(
            "--target", action="append", default=[], help="METRIC<=N or METRIC<=N%%, e.g. extra_messages<=1%%"
        )
        parser.add_argument("--out", type=Path, default=Path("replay-out"), help="directory for the results")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            targets = [Target.parse(text) for text in options["target"]]
            if options["recommend"]:
                if options["vary"]:
                    raise run.ReplayError("--recommend searches the field's range itself: leave --vary out")
                self._recommend(options, targets)
                return
            variation = run.Variation.parse(options["vary"]) if options["vary"] else None
            per_region = run.scan(options["timings"], options["region"])
            if not per_region:
                raise run.ReplayError(f"{options['timings']}: no records to replay")
            bases = run.baselines(per_region, options["policy_version"])
            policies = {region: run.candidates(base, variation) for region, base in bases.items()}
        except (run.ReplayError, ValueError) as error:
            raise CommandError(str(error)) from None
        total = sum(per_region.values())
        self.stderr.write(f"replaying {total} records x {len(next(iter(policies.values())))} candidate(s)")

        def progress(records: Any) -> Any:
            return tqdm(records, total=total, unit="rec", disable=options["no_progress"] or None, file=self.stderr)

        results = run.replay(options["timings"], policies, region=options["region"], progress=progress)
        baseline = ", ".join(str(base) for base in bases.values())
        written = run.write(options["out"], results, source=str(options["timings"]), baseline=baseline, targets=targets)
        for path in written:
            self.stdout.write(str(path))

    def _recommend(self, options: dict[str, Any], targets: list[Target]) -> None:
        field, path = options["recommend"], options["timings"]
        if field not in recommend.SEARCHABLE:
            raise run.ReplayError(f"--recommend {field}: choose one of {', '.join(recommend.SEARCHABLE)}")
        per_region = run.scan(path, options["region"])
        if not per_region:
            raise run.ReplayError(f"{path}: no records to replay")
        bases = run.baselines(per_region, options["policy_version"])
        records: dict[str, list[timings.Timing]] = {region: [] for region in bases}
        for record in timings.read(path):
            if record.region in records:
                records[record.region].append(record)
        found = []
        for region, base in sorted(bases.items()):
            self.stderr.write(f"{region}: searching {field} over {len(records[region])} records")
            found.append(recommend.recommend(field, base, records[region], targets))
        words = [recommend.summary(recommended, targets) for recommended in found]
        written = run.write(
            options["out"],
            {recommended.region: recommended.tried for recommended in found},
            source=str(path),
            baseline=", ".join(str(base) for base in bases.values()),
            targets=targets,
            recommendations=words,
        )
        now = timezone.now()
        for recommended in found:
            counts = recommended.counts
            if counts is None:
                continue
            Recommendation.objects.create(
                region=recommended.region,
                field=field,
                value=f"{recommended.value:g}",
                based_on=bases[recommended.region],
                targets=[str(target) for target in targets],
                figures=report.figures(counts),
                records=counts.events,
                source=path.name,
                created_at=now,
            )
        for text in words:
            self.stderr.write(text)
        for written_path in written:
            self.stdout.write(str(written_path))
