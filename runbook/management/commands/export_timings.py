from datetime import timedelta
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from notify.clock import system_clock
from runbook.replay import timings
from runbook.replay.export import export


class Command(BaseCommand):
    help = "Export this project's own reset timings in the de-identified format (docs/replay.md)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--since-hours", type=float, default=24 * 7, help="events created in the last N hours")
        parser.add_argument("--region", help="only this region")
        parser.add_argument("--out", type=Path, default=Path("timings.csv"))

    def handle(self, *args: Any, **options: Any) -> None:
        if options["since_hours"] <= 0:
            raise CommandError("--since-hours must be positive")
        since = system_clock.now() - timedelta(hours=options["since_hours"])
        written = timings.write(options["out"], export(since, options["region"]))
        self.stdout.write(f"{written} records written to {options['out']}")
