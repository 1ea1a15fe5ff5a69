"""Django admin for policy versions: drafts are edited, everything else is read-only."""

from typing import TYPE_CHECKING, Any, ClassVar

from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from policies import lifecycle
from policies.models import CONTENT_FIELDS, PolicyVersion, Status

LIFECYCLE_FIELDS = (
    "number",
    "status",
    "author",
    "approved_by",
    "approved_at",
    "published_at",
    "source_file",
    "source_hash",
    "changes_from_previous",
)


if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[PolicyVersion]
else:
    _ModelAdmin = admin.ModelAdmin  # generic only for the type checker


@admin.register(PolicyVersion)
class PolicyVersionAdmin(_ModelAdmin):
    list_display = ("region", "number", "status", "channel_plan", "alert_mode", "author", "approved_by", "published_at")
    list_filter = ("region", "status")
    ordering = ("region", "-number")
    actions: tuple[str, ...] = ("new_version_from", "approve", "publish")

    readonly_fields: ClassVar[tuple[str, ...]] = LIFECYCLE_FIELDS

    def has_change_permission(self, request: HttpRequest, obj: PolicyVersion | None = None) -> bool:
        # A version that left DRAFT is shown read-only and an edit is refused (403); the
        # model refuses the save as well, so this is not just a hidden button.
        if obj is not None and obj.status != Status.DRAFT:
            return False
        return super().has_change_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: PolicyVersion, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
        else:
            lifecycle.insert_draft(obj, author=staff_of(request))
        self.drafted(request, obj)

    def drafted(self, request: HttpRequest, draft: PolicyVersion) -> None:
        """A draft was created or its content changed. Nothing more here: the console's admin
        (runbook.policy_admin) asks for the draft's projected effect."""

    @admin.display(description="changes from the previous version")
    def changes_from_previous(self, obj: PolicyVersion) -> str:
        previous = PolicyVersion.objects.filter(region=obj.region, number__lt=obj.number).order_by("-number").first()
        if previous is None:
            return "first version of this region"
        changed = [
            (name, getattr(previous, name), getattr(obj, name))
            for name in CONTENT_FIELDS
            if getattr(previous, name) != getattr(obj, name)
        ]
        if not changed:
            return f"identical to {previous}"
        rows = format_html_join("", "<tr><th>{}</th><td>{}</td><td>{}</td></tr>", changed)
        return format_html(
            "<table><tr><th>setting</th><th>{}</th><th>this version</th></tr>{}</table>", str(previous), rows
        )

    @admin.action(description="Create a new draft version from this one")
    def new_version_from(self, request: HttpRequest, queryset: QuerySet[PolicyVersion]) -> None:
        for source in queryset:
            draft = lifecycle.draft_from(source, author=staff_of(request), reason=f"based on {source}")
            self.drafted(request, draft)
            self.message_user(request, f"Created draft {draft} from {source}.")

    @admin.action(description="Approve the selected drafts")
    def approve(self, request: HttpRequest, queryset: QuerySet[PolicyVersion]) -> None:
        user = staff_of(request)
        self._each(request, queryset, lambda v: lifecycle.approve(v, approver=user, now=timezone.now()), "approved")

    @admin.action(description="Publish the selected approved versions")
    def publish(self, request: HttpRequest, queryset: QuerySet[PolicyVersion]) -> None:
        user = staff_of(request)
        self._each(request, queryset, lambda v: lifecycle.publish(v, publisher=user, now=timezone.now()), "published")

    def _each(self, request: HttpRequest, queryset: QuerySet[PolicyVersion], step: Any, verb: str) -> None:
        for version in queryset:
            try:
                step(version)
            except (lifecycle.PolicyLifecycleError, ValidationError) as error:
                self.message_user(request, f"{version}: {error}", messages.ERROR)
            else:
                self.message_user(request, f"{version} {verb}.")


def staff_of(request: HttpRequest) -> User:
    # The admin only lets authenticated staff in: the user is always a real account.
    assert isinstance(request.user, User)
    return request.user
