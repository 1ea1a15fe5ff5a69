"""Approving a policy version on evidence: the projection of exactly the content approved, kept with it."""

from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction

from policies import lifecycle
from policies.models import PolicyVersion
from runbook import projections
from runbook.models import PolicyApproval

EVIDENCE_FIELDS = ("compared_with", "window_start", "window_end", "records", "generated", "figures", "broken_targets")


def approve(version: PolicyVersion, *, approver: User, now: datetime, reason: str = "") -> PolicyApproval:
    """Approve ``version`` as the approver saw it, with the figures of its projection.

    Refused without a projection of the current content (none yet, or the draft changed
    since: it is asked for again), and, for a draft that breaks the region's targets,
    without a written reason.
    """
    lifecycle.check_approver(version, approver)  # before anything else: who may approve at all
    known = projections.state_of(version)
    if not known.current or known.projection is None:
        projections.request(version, now)
        raise lifecycle.PolicyLifecycleError(
            f"{version} has no projection of its current content yet: it is being computed; "
            "approve once its projected effect is shown"
        )
    projection = known.projection
    if projection.broken_targets and not reason.strip():
        raise lifecycle.PolicyLifecycleError(
            f"{version}'s projection breaks the region's targets ({'; '.join(projection.broken_targets)}): "
            "approving it needs a written reason"
        )
    with transaction.atomic():
        # Approves exactly the content ``version`` holds (a compare-and-set), which is the
        # content the projection describes: the figures kept are those of what was approved.
        lifecycle.approve(version, approver=approver, now=now)
        return PolicyApproval.objects.create(
            policy=version,
            approver=approver,
            approved_at=now,
            content_hash=projection.content_hash,
            reason=reason.strip(),
            **{name: getattr(projection, name) for name in EVIDENCE_FIELDS},
        )
