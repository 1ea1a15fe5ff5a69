"""Read-only admin views of events for staff: states, claims and history, no personal data.

Nothing here writes: state changes go through ``notify.transitions`` (the console's
runbook actions), never through a model form. Raw provider statuses and payloads
are not shown (they need the console's dedicated permission).
"""

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.http import HttpRequest

from notify.models import Claim, Event, Transition

if TYPE_CHECKING:
    _EventAdmin = admin.ModelAdmin[Event]
    _ClaimInline = admin.TabularInline[Claim, Event]
    _TransitionInline = admin.TabularInline[Transition, Event]
else:  # generic only for the type checker
    _EventAdmin = admin.ModelAdmin
    _ClaimInline = _TransitionInline = admin.TabularInline


class ReadOnly:
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ClaimInline(ReadOnly, _ClaimInline):
    model = Claim
    fields = ("channel", "state", "attempts", "provider_ref", "submitted_at", "next_attempt_at", "updated_at")
    extra = 0


class TransitionInline(ReadOnly, _TransitionInline):
    model = Transition
    fields = ("version", "from_state", "to_state", "cause", "actor", "at")
    ordering = ("version",)
    extra = 0


@admin.register(Event)
class EventAdmin(ReadOnly, _EventAdmin):
    list_display = ("id", "region", "state", "next_action", "next_action_at", "act_by", "created_at", "expires_at")
    list_filter = ("region", "state", "next_action")
    search_fields = ("=id",)
    ordering = ("-created_at",)
    fields = (
        "id",
        "service",
        "region",
        "policy",
        "purpose",
        "fallback_available",
        "state",
        "version",
        "state_entered_at",
        "last_observation_at",
        "next_action",
        "next_action_at",
        "act_by",
        "lease_owner",
        "lease_expires_at",
        "created_at",
        "expires_at",
    )
    inlines = (ClaimInline, TransitionInline)
