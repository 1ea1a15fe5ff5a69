"""The policy admin with its evidence: each draft's projected effect, approval on it, recommended drafts.

Registered in place of ``policies.admin.PolicyVersionAdmin`` (runbook/admin.py): the rules
(policies) stand alone, and the evidence, which replays history, lives with the console.
"""

from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from policies import lifecycle
from policies.admin import LIFECYCLE_FIELDS, PREVIEW_FIELDS, PolicyVersionAdmin, staff_of
from policies.forms import ApprovalForm
from policies.models import AlertMode, PolicyVersion, Stage
from runbook.evidence import approvals, projections
from runbook.models import PolicyApproval, Projection, Recommendation


class EvidencedApprovalForm(ApprovalForm):
    reason = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Needed when the projection breaks the region's targets: why approve it anyway.",
    )


class EvidencedPolicyVersionAdmin(PolicyVersionAdmin):
    readonly_fields = (*LIFECYCLE_FIELDS, *PREVIEW_FIELDS, "projected_effect", "approval_evidence")
    actions = ("new_version_from", "draft_from_recommendation", "approve", "publish")
    approval_form = EvidencedApprovalForm

    def drafted(self, request: HttpRequest, draft: PolicyVersion) -> None:
        projections.request(draft, timezone.now())

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None) -> Any:
        version = self.get_object(request, object_id)
        if version is not None and version.status == Stage.DRAFT:
            # A draft without a projection of its current content (never asked for, or the
            # draft changed since) gets one asked for now; the page says it is on its way.
            projections.request(version, timezone.now())
        return super().change_view(request, object_id, form_url, extra_context)

    def history_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> Any:
        approval = PolicyApproval.objects.filter(policy__pk=object_id).select_related("approver").first()
        context = {**(extra_context or {}), "approval": approval, "evidence": _evidence_table(approval)}
        return super().history_view(request, object_id, context)

    def get_urls(self) -> list[Any]:
        own = [
            path(
                "<int:object_id>/projection.png",
                self.admin_site.admin_view(self.projection_png),
                name="policy_projection_png",
            ),
            path(
                "draft-paging/<str:region>/",
                self.admin_site.admin_view(self.draft_paging_view),
                name="policy_draft_paging",
            ),
        ]
        return own + super().get_urls()

    @admin.display(description="projected effect")
    def projected_effect(self, obj: PolicyVersion) -> SafeString:
        if obj.pk is None:
            return format_html("{}", "Shown once the draft is saved.")
        known = projections.state_of(obj)
        projection = known.projection
        if projection is None or not projection.content_hash:
            failure = projection.failure if projection is not None else ""
            return format_html(
                '<p class="projection-pending">{}</p>',
                f"The projection failed: {failure}" if failure else "Computing the projected effect… reload shortly.",
            )
        header = (
            format_html(
                '<p class="projection-stale errornote">{}</p>',
                "Stale: the draft changed since this projection was computed; it is being recomputed. "
                "The figures below are of the earlier content.",
            )
            if known.stale
            else ""
        )
        approve = ""
        if obj.status == Stage.DRAFT and known.current:
            approve = format_html(
                '<p><a class="button" href="{}">Approve this draft…</a></p>',
                reverse("admin:policy_approve", args=[obj.pk]),
            )
        return format_html("{}{}{}", header, _projection_table(projection, obj), approve)

    @admin.display(description="approved on")
    def approval_evidence(self, obj: PolicyVersion) -> SafeString:
        approval = PolicyApproval.objects.filter(policy=obj).select_related("approver").first()
        if approval is None:
            return format_html("{}", "not approved yet" if obj.status == Stage.DRAFT else "no recorded evidence")
        return _evidence_table(approval)

    def approval_context(self, version: PolicyVersion) -> dict[str, Any]:
        known = projections.state_of(version)
        projection = known.projection
        if not known.current or projection is None:
            # As on the draft's page: a projection of the content shown is asked for, and the
            # page says it is on its way; approval waits for it.
            projections.request(version, timezone.now())
            return {"ready": False}
        return {
            "ready": True,
            "projection": _projection_table(projection, version),
            "broken": projection.broken_targets,
        }

    def approve_as_shown(self, request: HttpRequest, version: PolicyVersion, data: dict[str, Any]) -> str:
        approvals.approve(
            version, approver=staff_of(request), shown=data["shown"], now=timezone.now(), reason=data["reason"]
        )
        return f"{version} approved, with the figures of its projection."

    def projection_png(self, request: HttpRequest, object_id: int) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        projection = get_object_or_404(Projection, policy_id=object_id)
        if not projection.tradeoff_png:
            raise Http404("no plot yet")
        return HttpResponse(bytes(projection.tradeoff_png), content_type="image/png")

    def draft_paging_view(self, request: HttpRequest, region: str) -> HttpResponse:
        """From /pages: a draft of the region's published version that pages (approval still needed)."""
        if request.method != "POST" or not self.has_add_permission(request):
            raise PermissionDenied
        published = PolicyVersion.objects.active_for(region)
        if published is None:
            raise Http404(f"region {region} has no published policy")
        reason = f"switch {region} from observe to page, after reviewing its would-have-paged events in /pages"
        draft = lifecycle.draft_from(
            published, author=staff_of(request), reason=reason, changes={"alert_mode": AlertMode.PAGE}
        )
        self.drafted(request, draft)
        self.message_user(request, f"Created draft {draft}, paging; it needs approval like any other.")
        return HttpResponseRedirect(reverse("admin:policies_policyversion_change", args=[draft.pk]))

    @admin.action(description="Create a draft from the region's latest recommendation", permissions=["add"])
    def draft_from_recommendation(self, request: HttpRequest, queryset: QuerySet[PolicyVersion]) -> None:
        for source in queryset:
            recommended = Recommendation.objects.filter(region=source.region).order_by("-created_at").first()
            if recommended is None:
                self.message_user(
                    request, f"{source.region} has no recommendation: run manage.py replay --recommend", messages.ERROR
                )
                continue
            value = _field_value(recommended)
            reason = (
                f"replay recommends {recommended.field}={recommended.value} "
                f"(targets {', '.join(recommended.targets)}; {recommended.records:,} records of {recommended.source})"
            )
            draft = lifecycle.draft_from(
                source, author=staff_of(request), reason=reason, changes={recommended.field: value}
            )
            self.drafted(request, draft)
            self.message_user(request, f"Created draft {draft} from {source} with {recommended.field}={value}.")


def _field_value(recommended: Recommendation) -> object:
    if recommended.field == "email_attempt_limit":
        return int(float(recommended.value))
    return timedelta(seconds=float(recommended.value))


def _projection_table(projection: Projection | None, version: PolicyVersion) -> SafeString:
    if projection is None:
        return format_html("{}", "")
    return _figures_table(
        figures=projection.figures,
        compared_with=projection.compared_with,
        version=str(version),
        broken=projection.broken_targets,
        about=_about(projection),
        plot=reverse("admin:policy_projection_png", args=[version.pk]) if projection.tradeoff_png else "",
    )


def _evidence_table(approval: PolicyApproval | None) -> SafeString:
    if approval is None:
        return format_html("{}", "")
    by = format_html(
        "<p>Approved by {} at {}{}.</p>",
        approval.approver,
        approval.approved_at.strftime("%Y-%m-%d %H:%M UTC"),
        format_html(", who wrote: “{}”", approval.reason) if approval.reason else "",
    )
    table = _figures_table(
        figures=approval.figures,
        compared_with=approval.compared_with,
        version=str(approval.policy),
        broken=approval.broken_targets,
        about=_about(approval),
        plot="",
    )
    return format_html("{}{}", by, table)


def _about(evidence: Projection | PolicyApproval) -> str:
    window = ""
    if evidence.window_start and evidence.window_end:
        window = f"{evidence.window_start:%Y-%m-%d %H:%M} to {evidence.window_end:%Y-%m-%d %H:%M} UTC, "
    source = "generated records" if evidence.generated else "records of this region's history"
    computed = getattr(evidence, "computed_at", None)
    when = f"; computed {computed:%Y-%m-%d %H:%M:%S} UTC" if computed else ""
    note = getattr(evidence, "note", "")
    return f"{window}{evidence.records:,} {source}{when}" + (f". {note}" if note else "")


def _figures_table(
    *, figures: dict[str, Any], compared_with: str, version: str, broken: list[str], about: str, plot: str
) -> SafeString:
    columns = [name for name in ("published", "draft") if name in figures]
    labels = {"published": f"published ({compared_with})", "draft": f"this draft ({version})"}
    head = format_html("".join("<th>{}</th>" for _ in columns), *[labels[name] for name in columns])
    rows = [
        format_html(
            "<tr><th>{}</th>" + "".join("<td>{}</td>" for _ in columns) + "</tr>",
            label,
            *[_shown(figures[name].get(metric)) for name in columns],
        )
        for metric, label in projections.FIGURES.items()
    ]
    verdict = (
        format_html('<p class="errornote projection-breaks">Breaks the region\'s targets: {}</p>', "; ".join(broken))
        if broken
        else format_html('<p class="projection-meets">{}</p>', "Meets the region's targets.")
    )
    image = (
        format_html(
            '<p><img class="projection-plot" src="{}" alt="{}"></p>',
            plot,
            "Trade-off: extra messages against useless fallbacks, published version and this draft",
        )
        if plot
        else ""
    )
    return format_html(
        '<div class="projection">{}<table><thead><tr><th>replayed</th>{}</tr></thead><tbody>{}</tbody></table>'
        '<p class="help">{}</p>{}</div>',
        verdict,
        head,
        format_html("".join("{}" for _ in rows), *rows),
        about,
        image,
    )


def _shown(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) else str(value)
