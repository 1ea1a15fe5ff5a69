"""Runbook actions: each writes through ``notify.writes.operator`` (the one table, the same CAS),
records the responder as the actor, is audited, and says plainly when it lost a race.

Plain form posts that redirect back to the event page (post/redirect/get), so they work
with or without htmx and a reload never repeats them.
"""

from django.contrib import messages
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from notify.models import Event
from notify.writes import operator
from notify.writes.cas import Written
from plumbing.clock import current_clock
from runbook.console import audit
from runbook.console.access import ConsoleRequest, requires
from runbook.console.forms import NoteForm, SeenLeaseForm, SeenVersionForm
from runbook.models import AuditAction


def _back(event_id: str) -> HttpResponse:
    return redirect("runbook:event", event_id=event_id)


@require_POST
@requires("runbook.act_on_events")
def release_expired_lease(request: ConsoleRequest, event_id: str) -> HttpResponse:
    """Free an expired lease and wake the event, so the next worker takes it now.

    A worker that died holding the event left the lease to run out; any worker may
    take it over already, but releasing it says so on the page and re-enqueues the
    event instead of waiting for the sweeper.
    """
    event = get_object_or_404(Event, pk=event_id)
    form = SeenLeaseForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The release form was incomplete; reload the page and try again.")
        return _back(event.id)
    clock = current_clock()
    holder = event.lease_owner
    # One transaction: the release, its note and its audit entry land together or not at
    # all, and the wake-up goes only once they are committed.
    with transaction.atomic():
        released = operator.release_expired_lease(
            event.id,
            form.cleaned_data["lease_token"],
            holder=holder,
            actor=audit.actor(request.user),
            at=clock.pinned(),
            now=clock.now(),
        )
        detail = f"lease of {holder}" if released else "the lease was renewed, taken over or already released"
        audit.record(request.user, AuditAction.RELEASE_LEASE, event.id, applied=released, detail=detail)
    if released:
        messages.success(request, "Lease released; a worker has been woken to take the event.")
    else:
        messages.error(
            request,
            "Not released: since you loaded the page the lease was renewed, taken over by another worker "
            "or already released. Nothing was changed.",
        )
    return _back(event.id)


@require_POST
@requires("runbook.act_on_events")
def claim_fallback(request: ConsoleRequest, event_id: str) -> HttpResponse:
    """Claim the email fallback now, if the table allows it and the event is as the responder saw it."""
    event = get_object_or_404(Event, pk=event_id)
    form = SeenVersionForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The claim form was incomplete; reload the page and try again.")
        return _back(event.id)
    seen = form.cleaned_data["version"]
    # The claim (its own compare-and-set) and the audit entry commit together; the worker
    # is woken only after the claim is visible to it.
    with transaction.atomic():
        written = operator.claim_fallback(
            event.id, seen_version=seen, actor=audit.actor(request.user), now=current_clock().now()
        )
        reason = "" if written.applied else _refusal(written, seen)
        audit.record(request.user, AuditAction.CLAIM_FALLBACK, event.id, applied=written.applied, detail=reason)
    if written.applied:
        messages.success(request, "Email fallback claimed; a worker is submitting it now.")
    else:
        messages.error(request, f"Not claimed: {reason} Nothing was changed.")
    return _back(event.id)


def _refusal(written: Written, seen: int) -> str:
    state = written.after.event.state
    if written.after.version != seen:
        return f"the event changed since you loaded the page (it is now {state}); review it and decide again."
    return f"the transition table does not allow the fallback from {state} now."


@require_POST
@requires("runbook.act_on_events")
def follow_up(request: ConsoleRequest, event_id: str) -> HttpResponse:
    """Mark the event for follow-up: an operator observation with the note, evidence only."""
    event = get_object_or_404(Event, pk=event_id)
    form = NoteForm(request.POST)
    if not form.is_valid():
        for error in form.errors.get("note", []):
            messages.error(request, f"Note not saved: {error}")
        return _back(event.id)
    text = form.cleaned_data["note"]
    # The note and the mark that lists it among the follow-ups land together.
    with transaction.atomic():
        operator.note(event.id, text, actor=audit.actor(request.user), now=current_clock().now())
        audit.record(request.user, AuditAction.FOLLOW_UP, event.id, applied=True, detail=text)
    messages.success(request, "Marked for follow-up.")
    return _back(event.id)
