"""Reviewed policy data files (TOML) and their loading into published versions."""

import hashlib
import tomllib
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.core.exceptions import ValidationError

from policies import lifecycle
from policies.models import CONTENT_FIELDS, DURATION_FIELDS, PolicyVersion

DEFAULTS_DIR = Path(__file__).resolve().parent / "defaults"
# Settings a file may leave out: the model's default then applies (resubmit, no locale sets),
# or, for the SMS segment limit, the one the version earns (PolicyVersion.settle_segment_limit).
OPTIONAL = ("resubmit_unknown_email", "locale_templates", "sms_max_segments")


class PolicyFileError(Exception):
    """A data file that cannot become a policy version; the message names the file and field."""


@dataclass(frozen=True)
class Loaded:
    path: Path
    version: PolicyVersion
    created: bool


def read(path: Path) -> tuple[dict[str, object], str]:
    """Return the policy content of ``path`` and the SHA-256 of its bytes."""
    raw = path.read_bytes()
    try:
        data = tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise PolicyFileError(f"{path.name}: not valid TOML: {error}") from None
    content: dict[str, object] = {}
    for key, value in data.items():
        name = key.removesuffix("_s")
        if key.endswith("_s") and name in DURATION_FIELDS:
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise PolicyFileError(f"{path.name}: {key} must be a number of seconds")
            content[name] = timedelta(seconds=value)
        elif key in CONTENT_FIELDS and key not in DURATION_FIELDS:
            content[key] = value
        else:
            raise PolicyFileError(f"{path.name}: unknown setting {key!r}")
    if missing := [name for name in CONTENT_FIELDS if name not in content and name not in OPTIONAL]:
        raise PolicyFileError(f"{path.name}: missing {', '.join(missing)}")
    return content, hashlib.sha256(raw).hexdigest()


def load(path: Path, *, now: datetime) -> Loaded:
    """Publish ``path`` as its region's new version, unless that region's active version came from it."""
    content, digest = read(path)
    active = PolicyVersion.objects.active_for(str(content["region"]))
    if active is not None and active.source_hash == digest:
        return Loaded(path, active, created=False)
    try:
        version = lifecycle.publish_reviewed(content, source_file=path.name, source_hash=digest, now=now)
    except ValidationError as error:
        details = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in error.message_dict.items())
        raise PolicyFileError(f"{path.name}: {details}") from None
    return Loaded(path, version, created=True)
