from datetime import timedelta
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Min

from plumbing.clock import current_clock
from policies.models import PolicyVersion
from runbook.replay import timings
from runbook.replay.export import export


class Command(BaseCommand):
    help = "Export this project's own reset timings in the de-identified format (docs/replay.md)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--since-hours", type=float, default=24 * 7, help="events created in the last N hours")
        parser.add_argument("--region", help="only this region")
        parser.add_argument("--seed", type=int, default=0, help="for the row order, shuffled to hide creation order")
        parser.add_argument("--out", type=Path, default=Path("timings.csv"))

    def handle(self, *args: Any, **options: Any) -> None:
        if options["since_hours"] <= 0:
            raise CommandError("--since-hours must be positive")
        window = timedelta(hours=options["since_hours"])
        # Observations older than their policy's retention are purged: an export reaching
        # further back would read those events as never confirmed.
        policies = PolicyVersion.objects.all()
        if options["region"]:
            policies = policies.filter(region=options["region"])
        kept = policies.aggregate(kept=Min("observation_retention"))["kept"]
        if kept is not None and window > kept:
            raise CommandError(
                f"--since-hours {options['since_hours']:g} reaches past the observation retention "
                f"({kept.total_seconds() / 3600:g} h): older events have lost their receipts"
            )
        since = current_clock().now() - window
        written = timings.write(options["out"], export(since, options["region"], seed=options["seed"]))
        self.stdout.write(f"{written} records written to {options['out']}")
