from typing import TYPE_CHECKING

from django.contrib import admin

from notify.admin import ReadOnly
from policies.models import PolicyVersion
from runbook.evidence.admin import EvidencedPolicyVersionAdmin
from runbook.models import AuditEntry

if TYPE_CHECKING:
    _AuditAdmin = admin.ModelAdmin[AuditEntry]
else:  # generic only for the type checker
    _AuditAdmin = admin.ModelAdmin


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnly, _AuditAdmin):
    """The console's audit trail: read-only, as an audit trail must be."""

    list_display = ("at", "user", "action", "event_id", "applied", "detail")
    list_filter = ("action", "applied")
    search_fields = ("event_id", "user__username")
    date_hierarchy = "at"
    list_select_related = ("user",)


# The policy admin with its evidence (projections, approval on them, recommended drafts) in
# place of the plain one policies registers: policies stands alone, and the evidence needs
# replay, which lives here. INSTALLED_APPS lists runbook after policies, so this comes second.
admin.site.unregister(PolicyVersion)
admin.site.register(PolicyVersion, EvidencedPolicyVersionAdmin)
