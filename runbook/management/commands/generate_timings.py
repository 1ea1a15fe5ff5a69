from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runbook.replay import timings
from runbook.replay.generate import SHAPES, generate


class Command(BaseCommand):
    help = "Write production-shaped synthetic reset timings (docs/replay.md), reproducible from a seed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--count", type=int, default=100_000, help="records to write")
        parser.add_argument("--seed", type=int, default=1, help="same seed, same file")
        parser.add_argument("--regions", default=",".join(SHAPES), help=f"comma-separated, from {', '.join(SHAPES)}")
        parser.add_argument("--out", type=Path, default=Path("timings.csv"))

    def handle(self, *args: Any, **options: Any) -> None:
        regions = tuple(region.strip() for region in options["regions"].split(",") if region.strip())
        unknown = [region for region in regions if region not in SHAPES]
        if unknown or not regions:
            raise CommandError(f"--regions: no shape for {', '.join(unknown) or 'an empty list'} ({', '.join(SHAPES)})")
        if options["count"] < 1:
            raise CommandError("--count must be at least 1")
        written = timings.write(options["out"], generate(options["count"], options["seed"], regions))
        self.stdout.write(f"{written} records written to {options['out']}")
