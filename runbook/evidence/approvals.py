"""Approving a policy version on evidence: the projection of exactly the content approved, kept with it."""

from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction

from policies import lifecycle
from policies.models import PolicyVersion
from runbook.evidence import projections
from runbook.models import PolicyApproval

EVIDENCE_FIELDS = ("compared_with", "window_start", "window_end", "records", "generated", "figures", "broken_targets")


def approve(version: PolicyVersion, *, approver: User, shown: str, now: datetime, reason: str = "") -> PolicyApproval:
    """Approve ``version`` as the approver was shown it (``shown``: its content digest), with its projection's figures.

    Refused when the draft changed since it was shown, without a projection of the content
    shown (none yet: it is asked for), and, for a draft that breaks the region's targets,
    without a written reason.
    """
    # Before anything else: who may approve at all, and whether this is still what they saw
    # (lifecycle.approve checks both again under the row's lock).
    lifecycle.check_approver(version, approver)
    lifecycle.check_shown(version, shown)
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
        # Approves only the content shown, which is the content the projection describes (its
        # hash is the same digest): the figures kept are those of what was approved.
        lifecycle.approve(version, approver=approver, shown=shown, now=now)
        return PolicyApproval.objects.create(
            policy=version,
            approver=approver,
            approved_at=now,
            content_hash=shown,
            reason=reason.strip(),
            **{name: getattr(projection, name) for name in EVIDENCE_FIELDS},
        )
