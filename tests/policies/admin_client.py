"""The policy admin as a person uses it: its forms filled in, a draft approved as its approval page shows it."""

import re
from datetime import timedelta

from django.urls import reverse

from policies.models import PolicyVersion

SHOWN = re.compile(r'name="shown" value="([0-9a-f]*)"')


def form_of(version: PolicyVersion) -> dict[str, object]:
    """The admin form's fields with the version's current values."""
    data: dict[str, object] = {}
    for field in PolicyVersion._meta.concrete_fields:
        value = getattr(version, field.attname)
        if value is None or field.attname in ("id", "created_at"):
            continue
        if isinstance(value, timedelta):
            value = str(value)
        elif isinstance(value, bool):
            if not value:
                continue
            value = "on"
        elif isinstance(value, list):
            value = str(value)
        data[field.attname] = value
    return data


def approve_url(version: PolicyVersion) -> str:
    return reverse("admin:policy_approve", args=[version.pk])


def shown_on(page) -> str:
    """The digest of the content an approval page showed, as its form carries it ("" if it carries none)."""
    found = SHOWN.search(page.content.decode())
    return found.group(1) if found else ""
