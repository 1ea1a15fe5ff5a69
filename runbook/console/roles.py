"""The console's two roles: responders act on events, viewers only look.

Staff (the admin) is a separate flag on the account; raw provider statuses need
their own permission, granted per person rather than per role.
"""

from django.contrib.auth.models import Group, Permission

GROUPS: dict[str, list[str]] = {
    "responders": ["view_console", "act_on_events"],
    "viewers": ["view_console"],
}


def ensure_groups() -> None:
    """Create the role groups with their permissions (idempotent)."""
    for name, codenames in GROUPS.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*Permission.objects.filter(content_type__app_label="runbook", codename__in=codenames))
