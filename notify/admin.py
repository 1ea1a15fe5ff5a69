"""Read-only admin views of events for staff: states, claims and history, no personal data.

Nothing here writes: state changes go through ``notify.writes`` (the console's
runbook actions), never through a model form. Raw provider statuses and payloads
are not shown (they need the console's dedicated permission).
"""

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers

from notify.models import Claim, Event, ServiceToken, Transition

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


if TYPE_CHECKING:
    _TokenAdmin = admin.ModelAdmin[ServiceToken]
else:
    _TokenAdmin = admin.ModelAdmin

# The request attribute a new token travels on, from save_model to response_add.
_ISSUED_TOKEN = "_issued_service_token"


@admin.register(ServiceToken)
class ServiceTokenAdmin(_TokenAdmin):
    """Create (the token is shown once, on the page answering the creation) and revoke service tokens."""

    list_display = ("service", "label", "prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = ("service",)
    search_fields = ("service", "label", "prefix")
    readonly_fields = ("prefix", "created_at", "last_used_at", "revoked_at")
    actions = ("revoke",)

    def get_fields(self, request: HttpRequest, obj: ServiceToken | None = None) -> list[str]:  # type: ignore[override]
        if obj is None:
            return ["service", "label"]
        return ["service", "label", "prefix", "created_at", "last_used_at", "revoked_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: ServiceToken | None = None) -> list[str]:
        return ["service", *self.readonly_fields] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: ServiceToken, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        issued, token = ServiceToken.issue(obj.service, now=timezone.now(), label=obj.label)
        obj.pk, obj.prefix, obj.digest, obj.created_at = issued.pk, issued.prefix, issued.digest, issued.created_at
        # Handed to response_add on this request only: a message would carry the token in a
        # cookie or the session (MESSAGE_STORAGE), and a redirect would need it stored.
        setattr(request, _ISSUED_TOKEN, token)

    def response_add(
        self, request: HttpRequest, obj: ServiceToken, post_url_continue: str | None = None
    ) -> HttpResponse:
        """Show the new token in the answer to the POST that created it, and nowhere else."""
        token: str = getattr(request, _ISSUED_TOKEN)  # every addition issues one (save_model)
        context = {**self.admin_site.each_context(request), "opts": self.opts, "issued": obj, "token": token}
        response = TemplateResponse(request, "admin/notify/servicetoken/issued.html", context)
        add_never_cache_headers(response)  # no browser or proxy keeps a copy of the page
        return response

    # Revoking changes a token: a view-only staff user is not offered it, and cannot post it.
    @admin.action(description="Revoke the selected tokens (effective at once)", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ServiceToken]) -> None:
        revoked = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)

    def has_delete_permission(self, request: HttpRequest, obj: ServiceToken | None = None) -> bool:
        # Revoked, not deleted: "last used" stays on record for the audit.
        return False
