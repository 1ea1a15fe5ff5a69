"""The console's two roles: responders act on events, viewers only look.

Staff (the admin) is a separate flag on the account; raw provider statuses need
their own permission, granted per person rather than per role.
"""

from typing import Any

GROUPS: dict[str, list[str]] = {
    "responders": ["view_console", "act_on_events"],
    "viewers": ["view_console"],
}


def ensure_groups(group_model: Any, permission_model: Any) -> None:
    """Create the role groups with their permissions (idempotent); models may be historical ones."""
    for name, codenames in GROUPS.items():
        group, _ = group_model.objects.get_or_create(name=name)
        group.permissions.add(
            *permission_model.objects.filter(content_type__app_label="runbook", codename__in=codenames)
        )
