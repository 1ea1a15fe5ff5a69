"""Django admin for policy versions: drafts are edited, approved on a page showing what is approved,
everything else is read-only; each action that writes is offered only to those with its permission."""

from typing import TYPE_CHECKING, Any, ClassVar

from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from policies import lifecycle, sms_check
from policies.forms import ApprovalForm, PolicyVersionForm
from policies.models import CONTENT_FIELDS, PolicyVersion, Stage, content_digest

LIFECYCLE_FIELDS = (
    "number",
    "status",
    "author",
    "edited_by",
    "approved_by",
    "approved_at",
    "published_at",
    "source_file",
    "source_hash",
    "changes_from_previous",
)
# What the version's content implies, computed for the page: each locale's SMS at its longest.
PREVIEW_FIELDS = ("sms_by_locale",)


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
    form = PolicyVersionForm

    readonly_fields: ClassVar[tuple[str, ...]] = (*LIFECYCLE_FIELDS, *PREVIEW_FIELDS)
    approval_form: type[ApprovalForm] = ApprovalForm

    def has_change_permission(self, request: HttpRequest, obj: PolicyVersion | None = None) -> bool:
        # A version that left DRAFT is shown read-only and an edit is refused (403); the
        # model refuses the save as well, so this is not just a hidden button.
        if obj is not None and obj.status != Stage.DRAFT:
            return False
        return super().has_change_permission(request, obj)

    def has_approve_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("policies.approve_policyversion")

    def has_publish_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("policies.publish_policyversion")

    def get_urls(self) -> list[Any]:
        approve = path("<int:object_id>/approve/", self.admin_site.admin_view(self.approve_view), name="policy_approve")
        return [approve, *super().get_urls()]

    def save_model(self, request: HttpRequest, obj: PolicyVersion, form: Any, change: bool) -> None:
        if change:
            obj.save(editor=staff_of(request))
        else:
            lifecycle.insert_draft(obj, author=staff_of(request))
        self.drafted(request, obj)

    def drafted(self, request: HttpRequest, draft: PolicyVersion) -> None:
        """A draft was created or its content changed. Nothing more here: the console's admin
        (runbook.policy_admin) asks for the draft's projected effect."""

    @admin.display(description="edited by")
    def edited_by(self, obj: PolicyVersion) -> str:
        if obj.pk is None:
            return ""
        names = sorted(editor.get_username() for editor in obj.editors.all())
        return ", ".join(names) or "no one since it was drafted"

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

    @admin.display(description="SMS by locale, at its longest")
    def sms_by_locale(self, obj: PolicyVersion) -> str:
        """Per template set: encoding, characters, segments against the limit, and the SMS itself
        rendered with a placeholder link of the longest length accepted and the longest expiry."""
        if obj.pk is None:
            return "Shown once the draft is saved."
        if not obj.uses_sms:
            return "This plan sends no SMS."
        try:
            checks = sms_check.check(obj)
        except sms_check.UNMEASURABLE as error:  # the form names what is wrong
            return f"Not measurable until the templates render ({type(error).__name__})."
        rows = format_html_join(
            "",
            '<tr class="{}"><th scope="row">{}</th><td>{}</td><td>{}</td><td>{} of {}</td><td>{}</td>'
            '<td><code class="sms-preview">{}</code></td></tr>',
            (
                (
                    "within-limit" if check.within_limit else "over-limit errornote",
                    check.template_set.label,
                    check.encoded.encoding,
                    check.encoded.characters,
                    check.encoded.segments,
                    check.limit,
                    check.forced_summary,
                    check.preview,
                )
                for check in checks
            ),
        )
        return format_html(
            '<table class="sms-by-locale"><caption>{}</caption><thead><tr><th scope="col">locale</th>'
            '<th scope="col">encoding</th><th scope="col">characters</th><th scope="col">segments</th>'
            '<th scope="col">UCS-2 forced by</th><th scope="col">SMS (placeholder link)</th></tr></thead>'
            "<tbody>{}</tbody></table>",
            f"Link of {obj.reset_url_max_length} characters, the longest expiry text of any subscriber.",
            rows,
        )

    def approve_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """Show a draft as it is now and approve exactly that: the form carries the digest of the content shown.

        A refused approval shows the draft as it is now, with the digest of that content.
        """
        version = get_object_or_404(PolicyVersion, pk=object_id)
        if version.status != Stage.DRAFT:
            raise Http404(f"{version} is not a draft")
        form = self.approval_form(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                done = self.approve_as_shown(request, version, form.cleaned_data)
            except (lifecycle.PolicyLifecycleError, ValidationError) as error:
                message = "; ".join(error.messages) if isinstance(error, ValidationError) else str(error)
                form.add_error("reason" if "reason" in form.fields and "reason" in message else None, message)
            else:
                self.message_user(request, done)
                return HttpResponseRedirect(reverse("admin:policies_policyversion_change", args=[version.pk]))
        context = {
            **self.admin_site.each_context(request),
            "title": f"Approve {version}",
            "version": version,
            "opts": self.model._meta,
            "form": form,
            # One reading of the version renders the page and its digest: the digest is of what is shown.
            "shown": content_digest(version),
            "changes": self.changes_from_previous(version),
            **self.approval_context(version),
        }
        return TemplateResponse(request, "admin/policies/policyversion/approve.html", context)

    def approval_context(self, version: PolicyVersion) -> dict[str, Any]:
        """What the approval page shows beside the content; ``ready`` is whether it can approve."""
        return {"ready": True}

    def approve_as_shown(self, request: HttpRequest, version: PolicyVersion, data: dict[str, Any]) -> str:
        """Approve ``version`` if it still has the content shown; return what to tell the approver."""
        lifecycle.approve(version, approver=staff_of(request), shown=data["shown"], now=timezone.now())
        return f"{version} approved."

    @admin.action(description="Create a new draft version from this one", permissions=["add"])
    def new_version_from(self, request: HttpRequest, queryset: QuerySet[PolicyVersion]) -> None:
        for source in queryset:
            draft = lifecycle.draft_from(source, author=staff_of(request), reason=f"based on {source}")
            self.drafted(request, draft)
            self.message_user(request, f"Created draft {draft} from {source}.")

    @admin.action(description="Approve the selected draft…", permissions=["approve"])
    def approve(self, request: HttpRequest, queryset: QuerySet[PolicyVersion]) -> HttpResponse | None:
        """Open the selected draft's approval page: a draft is approved as that page shows it."""
        selected = list(queryset[:2])
        if len(selected) != 1 or selected[0].status != Stage.DRAFT:
            self.message_user(
                request, "Select one draft to approve: each is approved as its own page shows it.", messages.ERROR
            )
            return None
        return HttpResponseRedirect(reverse("admin:policy_approve", args=[selected[0].pk]))

    @admin.action(description="Publish the selected approved versions", permissions=["publish"])
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
