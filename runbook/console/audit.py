"""Writing the console's audit trail."""

from django.contrib.auth.models import User

from plumbing.clock import current_clock
from runbook.models import AuditAction, AuditEntry


def record(user: User, action: AuditAction, event_id: str, *, applied: bool, detail: str = "") -> None:
    AuditEntry.objects.create(
        user=user, action=action, event_id=event_id, at=current_clock().now(), applied=applied, detail=detail[:500]
    )


def actor(user: User) -> str:
    """Return how a console user appears as the actor of a transition or observation."""
    return f"operator:{user.get_username()}"
