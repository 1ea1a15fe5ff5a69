from datetime import timedelta

from django import template

from notify.models import Observation
from runbook.console import wording

register = template.Library()


@register.filter
def duration(value: timedelta | None) -> str:
    """Render a duration the way a responder reads it: ``2m 05s``, ``-12s`` when past."""
    if value is None:
        return "—"
    seconds = int(value.total_seconds())
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds < 60:
        return f"{sign}{seconds}s"
    if seconds < 3600:
        return f"{sign}{seconds // 60}m {seconds % 60:02d}s"
    if seconds < 86400:
        return f"{sign}{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    return f"{sign}{seconds // 86400}d {seconds % 86400 // 3600:02d}h"


@register.filter
def magnitude(value: timedelta | None) -> timedelta | None:
    """Drop the sign: "overdue by 12s" reads better than "overdue by -12s"."""
    return abs(value) if value is not None else None


@register.filter
def worded(observation: Observation) -> wording.Worded:
    """What an observation means, in words (``runbook.console.wording``): ``{% with said=obs|worded %}``."""
    return wording.of(observation)
