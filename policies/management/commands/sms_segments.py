"""Print each locale's SMS at its longest for policy data files: the table a reviewer of a wording change reads."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from policies import datafiles, sms_check
from policies.models import PolicyVersion


class Command(BaseCommand):
    help = (
        "For each policy data file, each template set's SMS rendered with the longest link and expiry: "
        "encoding, characters, segments against sms_max_segments. Exits non-zero when one is over."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="*", type=Path, help="TOML files (default: policies/defaults/*.toml)")

    def handle(self, *args: Any, **options: Any) -> None:
        files = options["files"] or sorted(datafiles.DEFAULTS_DIR.glob("*.toml"))
        over = []
        for path in files:
            try:
                content, _ = datafiles.read(path)
            except (OSError, datafiles.PolicyFileError) as error:
                raise CommandError(str(error)) from None
            version = PolicyVersion(**content)
            version.settle_segment_limit()
            self.stdout.write(
                f"\n{path.name} ({version.region}): links up to {version.reset_url_max_length} characters\n"
            )
            self.stdout.write("| locale | encoding | characters | segments | UCS-2 forced by |")
            self.stdout.write("|---|---|---|---|---|")
            for check in sms_check.check(version):
                encoded = check.encoded
                self.stdout.write(
                    f"| {check.template_set.label} | {encoded.encoding} | {encoded.characters} "
                    f"| {encoded.segments} of {check.limit} | {check.forced_summary} |"
                )
                if not check.within_limit:
                    over.append(f"{path.name}: {check.problem}")
        if over:
            raise CommandError("\n".join(over))
