"""Drafting, approving and publishing policy versions.

Every step is a compare-and-set on the version's status, so two people acting
at once cannot both approve, or publish over each other: one wins, the other
gets a clear error.
"""

from datetime import datetime

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Max

from policies.models import CONTENT_FIELDS, PolicyVersion, Status


class PolicyLifecycleError(Exception):
    """A lifecycle step refused; the message says why."""


def next_number(region: str) -> int:
    current = PolicyVersion.objects.filter(region=region).aggregate(top=Max("number"))["top"]
    return (current or 0) + 1


def draft_from(source: PolicyVersion, *, author: User | None, reason: str) -> PolicyVersion:
    """Create a new draft with ``source``'s content and the region's next number."""
    content = {name: getattr(source, name) for name in CONTENT_FIELDS}
    for _ in range(3):
        try:
            with transaction.atomic():
                return PolicyVersion.objects.create(
                    **content,
                    number=next_number(source.region),
                    status=Status.DRAFT,
                    author=author,
                    reason=reason,
                )
        except IntegrityError:
            continue  # someone took that number first: take the next one
    raise PolicyLifecycleError(f"could not allocate a version number for {source.region}")


def approve(version: PolicyVersion, *, approver: User, now: datetime) -> None:
    """Record the approval of a draft by someone other than its author who may approve."""
    if not approver.has_perm("policies.approve_policyversion"):
        raise PolicyLifecycleError("approving a policy version needs the approver permission")
    if version.author_id is not None and version.author_id == approver.pk:
        raise PolicyLifecycleError("a policy version must be approved by someone other than its author")
    version.refresh_from_db()  # validate what is stored, not a copy loaded earlier
    version.full_clean()
    approved = PolicyVersion.objects.filter(pk=version.pk, status=Status.DRAFT).update(
        status=Status.APPROVED, approved_by=approver, approved_at=now
    )
    if approved != 1:
        raise PolicyLifecycleError(f"{version} is no longer a draft")
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
