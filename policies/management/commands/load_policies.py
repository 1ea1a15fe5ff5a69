"""Load the reviewed policy data files; idempotent (an unchanged file creates nothing)."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from policies import datafiles


class Command(BaseCommand):
    help = "Publish each region's policy data file as a new version if it changed since it was last loaded."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="*", type=Path, help="TOML files (default: policies/defaults/*.toml)")

    def handle(self, *args: Any, **options: Any) -> None:
        files = options["files"] or sorted(datafiles.DEFAULTS_DIR.glob("*.toml"))
        for path in files:
            try:
                loaded = datafiles.load(path, now=timezone.now())
            except (OSError, datafiles.PolicyFileError) as error:
                raise CommandError(str(error)) from None
            verb = "published" if loaded.created else "unchanged"
            self.stdout.write(f"{path.name}: {verb} {loaded.version}")
