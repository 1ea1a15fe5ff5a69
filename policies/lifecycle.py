"""Drafting, approving and publishing policy versions.

Every step is a compare-and-set on the version's status, so two people acting
at once cannot both approve, or publish over each other: one wins, the other
gets a clear error. An approval is of the content the approver was shown (its
digest), by someone who wrote none of it.
"""

from collections.abc import Mapping
from datetime import datetime

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Max

from policies.models import CONTENT_FIELDS, PolicyVersion, Stage, content_digest

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
    draft.status, draft.author = Stage.DRAFT, author
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
    """Refuse an approver without the permission, or one who wrote any of the version: its author or an editor."""
    if not approver.has_perm("policies.approve_policyversion"):
        raise PolicyLifecycleError("approving a policy version needs the approver permission")
    rule = "a policy version must be approved by someone other than its author or editors"
    if version.author_id is not None and version.author_id == approver.pk:
        raise PolicyLifecycleError(f"{rule}: you are its author")
    if version.editors.filter(pk=approver.pk).exists():
        raise PolicyLifecycleError(f"{rule}: you edited it")


def check_shown(version: PolicyVersion, shown: str) -> None:
    """Refuse an approval of content other than ``version``'s: the draft changed since it was shown."""
    if content_digest(version) != shown:
        raise PolicyLifecycleError(f"{version} changed since you opened it; review it again")


def approve(version: PolicyVersion, *, approver: User, shown: str, now: datetime) -> None:
    """Approve the draft whose content has the digest ``shown``: the content its approver was shown.

    Refused, and nothing approved, when the draft changed since it was shown (the approver
    reviews it again), is no longer a draft, or was written in part by the approver.
    """
    with transaction.atomic():
        # The row stays locked until the approval commits. An edit writes its content and its
        # editor in one transaction under the same lock (PolicyVersion.save): either it committed
        # first and is seen here, or it waits and then finds the version approved and refuses.
        # Checking without the lock would let an edit land between the check and the approval.
        current = PolicyVersion.objects.select_for_update().filter(pk=version.pk, status=Stage.DRAFT).first()
        if current is None:
            raise PolicyLifecycleError(f"{version} is no longer a draft: there is nothing left to approve")
        check_approver(current, approver)
        check_shown(current, shown)
        current.full_clean()
        PolicyVersion.objects.filter(pk=current.pk).update(status=Stage.APPROVED, approved_by=approver, approved_at=now)
    version.refresh_from_db()


def publish(version: PolicyVersion, *, publisher: User, now: datetime) -> None:
    """Make an approved version the region's active one, retiring the one before it."""
    if not publisher.has_perm("policies.publish_policyversion"):
        raise PolicyLifecycleError("publishing a policy version needs the publish permission")
    with transaction.atomic():
        _retire_current(version.region, keep=version.pk)
        published = PolicyVersion.objects.filter(pk=version.pk, status=Stage.APPROVED).update(
            status=Stage.PUBLISHED, published_at=now
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
            status=Stage.PUBLISHED,
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
    current = PolicyVersion.objects.filter(region=region, status=Stage.PUBLISHED)
    if keep is not None:
        current = current.exclude(pk=keep)
    current.update(status=Stage.RETIRED)
