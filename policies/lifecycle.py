"""Drafting, approving and publishing policy versions.

Every step is a compare-and-set on the version's status, so two people acting
at once cannot both approve, or publish over each other: one wins, the other
gets a clear error.
"""

from collections.abc import Mapping
from datetime import datetime

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Max

from policies.models import CONTENT_FIELDS, PolicyVersion, Status

MAX_NUMBER_RACES = 16


class PolicyLifecycleError(Exception):
    """A lifecycle step refused; the message says why."""


def next_number(region: str) -> int:
    current = PolicyVersion.objects.filter(region=region).aggregate(top=Max("number"))["top"]
    return (current or 0) + 1


def draft_from(
    source: PolicyVersion, *, author: User | None, reason: str, changes: Mapping[str, object] | None = None
) -> PolicyVersion:
    """Create a new draft with ``source``'s content, ``changes`` applied, and the region's next number."""
    content = {name: getattr(source, name) for name in CONTENT_FIELDS} | dict(changes or {})
    draft = PolicyVersion(**content, reason=reason)
    return insert_draft(draft, author=author)


def insert_draft(draft: PolicyVersion, *, author: User | None) -> PolicyVersion:
    """Save an unsaved version as a draft under its region's next number."""
    draft.status, draft.author = Status.DRAFT, author
    # Each failed insert means another draft of this region took the number: at most
    # one retry per author drafting at the same moment.
    for _ in range(MAX_NUMBER_RACES):
        draft.number = next_number(draft.region)
        try:
            with transaction.atomic():
                draft.save(force_insert=True)
            return draft
        except IntegrityError:
            continue  # someone took that number first: take the next one
    raise PolicyLifecycleError(f"could not allocate a version number for {draft.region}")


def check_approver(version: PolicyVersion, approver: User) -> None:
    """Refuse an approver without the permission, or the version's own author."""
    if not approver.has_perm("policies.approve_policyversion"):
        raise PolicyLifecycleError("approving a policy version needs the approver permission")
    if version.author_id is not None and version.author_id == approver.pk:
        raise PolicyLifecycleError("a policy version must be approved by someone other than its author")


def approve(version: PolicyVersion, *, approver: User, now: datetime) -> None:
    """Record the approval of a draft, as ``version`` shows it, by someone other than its author.

    ``version`` is the content the approver reviewed: if the draft was edited since,
    nothing is approved and the approver is asked to review it again.
    """
    check_approver(version, approver)
    version.full_clean()
    # Approve exactly the content reviewed and validated: an edit that landed since makes this 0 rows.
    validated = {name: getattr(version, name) for name in CONTENT_FIELDS}
    approved = PolicyVersion.objects.filter(pk=version.pk, status=Status.DRAFT, **validated).update(
        status=Status.APPROVED, approved_by=approver, approved_at=now
    )
    if approved != 1:
        raise PolicyLifecycleError(f"{version} changed or is no longer a draft: review it again")
    version.refresh_from_db()


def publish(version: PolicyVersion, *, publisher: User, now: datetime) -> None:
    """Make an approved version the region's active one, retiring the one before it."""
    if not publisher.has_perm("policies.publish_policyversion"):
        raise PolicyLifecycleError("publishing a policy version needs the publish permission")
    with transaction.atomic():
        _retire_current(version.region, keep=version.pk)
        published = PolicyVersion.objects.filter(pk=version.pk, status=Status.APPROVED).update(
            status=Status.PUBLISHED, published_at=now
        )
        if published != 1:
            raise PolicyLifecycleError(f"{version} is not approved (or was published by someone else)")
    version.refresh_from_db()


def publish_reviewed(content: dict[str, object], *, source_file: str, source_hash: str, now: datetime) -> PolicyVersion:
    """Publish a version whose content was reviewed where code is reviewed (a data file in the repo)."""
    region = str(content["region"])
    with transaction.atomic():
        version = PolicyVersion(
            **content,
            number=next_number(region),
            status=Status.PUBLISHED,
            reason=f"loaded from {source_file}",
            source_file=source_file,
            source_hash=source_hash,
            published_at=now,
        )
        version.full_clean(exclude=["number", "status"])
        _retire_current(region, keep=None)
        version.save()
    return version


def _retire_current(region: str, *, keep: int | None) -> None:
    # The partial unique constraint allows one PUBLISHED row per region: retire first.
    current = PolicyVersion.objects.filter(region=region, status=Status.PUBLISHED)
    if keep is not None:
        current = current.exclude(pk=keep)
    current.update(status=Status.RETIRED)
