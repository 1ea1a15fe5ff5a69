"""The open-events list: most urgent first, filtered, counted, paginated, searchable, live."""

from datetime import timedelta

import pytest
from django.urls import reverse

from notify.rules.vocabulary import State
from notify.writes import leases
from runbook.console import views
from tests.factories import PolicyVersionFactory, new_event
from tests.runbook.events import event_in

LIST = reverse("runbook:events")


@pytest.fixture
def client_(console, viewer):
    return console(viewer)


def _listed(response) -> list[str]:
    return [row.event.id for row in response.context["rows"]]


def test_it_lists_open_events_by_remaining_budget_most_urgent_first(client_, policy, clock):
    roomy = new_event(clock.now(), ttl=timedelta(seconds=900))
    urgent = new_event(clock.now(), ttl=timedelta(seconds=200))
    middle = new_event(clock.now(), ttl=timedelta(seconds=400))
    assert _listed(client_.get(LIST)) == [urgent.id, middle.id, roomy.id]


def test_terminal_events_are_not_listed(client_, policy, clock):
    delivered = event_in(State.SMS_DELIVERED, clock)
    open_ = new_event(clock.now())
    assert _listed(client_.get(LIST)) == [open_.id]
    assert delivered.id not in client_.get(LIST).content.decode()


def test_it_filters_by_region_and_state_and_counts_each_state(client_, policy, clock):
    PolicyVersionFactory.create(region="EU", allowed_sms_country_codes=[44])
    us_pending = event_in(State.SMS_PENDING, clock)
    us_requested = new_event(clock.now())
    eu_requested = new_event(clock.now(), region="EU", phone="+447911123456")

    assert set(_listed(client_.get(LIST, {"region": "US"}))) == {us_pending.id, us_requested.id}
    assert _listed(client_.get(LIST, {"state": "sms_pending"})) == [us_pending.id]
    assert _listed(client_.get(LIST, {"region": "EU", "state": "sms_requested"})) == [eu_requested.id]
    counts = {state: count for state, count, _ in client_.get(LIST).context["states"]}
    assert counts[State.SMS_REQUESTED] == 2
    assert counts[State.SMS_PENDING] == 1
    assert counts[State.SMS_FAILED] == 0


def test_unknown_filter_values_are_ignored_not_errors(client_, policy, clock):
    event = new_event(clock.now())
    response = client_.get(LIST, {"region": "XX", "state": "sms_delivered", "page": "banana"})
    assert response.status_code == 200
    assert _listed(response) == [event.id]


def test_events_within_the_page_margin_are_highlighted_as_at_risk(client_, policy, clock):
    event = new_event(clock.now(), ttl=timedelta(seconds=600))
    assert not client_.get(LIST).context["rows"][0].timing.at_risk
    # act_by = expiry - 9s of remaining steps; the policy pages under 30s of budget.
    clock.advance(600 - 9 - 29)
    response = client_.get(LIST)
    assert response.context["rows"][0].timing.at_risk
    assert f'<tr class="at-risk" data-event="{event.id}">' in response.content.decode()


def test_it_pages_through_open_events(client_, policy, clock, monkeypatch):
    monkeypatch.setattr(views, "PAGE_SIZE", 2)
    events = [new_event(clock.now(), ttl=timedelta(seconds=300 + n)) for n in range(5)]
    ids = [event.id for event in events]
    assert _listed(client_.get(LIST)) == ids[:2]
    assert _listed(client_.get(LIST, {"page": 3})) == ids[4:]
    # Past the end: the last page, not an error.
    assert _listed(client_.get(LIST, {"page": 9})) == ids[4:]
    assert 'href="?page=2"' in client_.get(LIST).content.decode()


def test_search_by_exact_event_id_opens_the_event(client_, policy, clock):
    event = event_in(State.SMS_DELIVERED, clock)
    response = client_.get(LIST, {"q": f"  {event.id} "})
    assert response.status_code == 302
    assert response["Location"] == reverse("runbook:event", args=[event.id])


def test_a_search_that_finds_nothing_says_so_without_echoing_the_input(client_, policy):
    response = client_.get(LIST, {"q": "+14155550123"})
    assert response.status_code == 200
    assert "No event has that id" in response.content.decode()
    assert "14155550123" not in response.content.decode()


@pytest.mark.parametrize("search", ["\x00", "evt_01ARZ3NDEKTSV4RRFFQ69G5F\x00V"], ids=["nul", "nul-inside"])
def test_a_search_for_an_id_no_event_can_have_lists_nothing_found(client_, policy, search):
    # PostgreSQL refuses a NUL in text: searched for, it made an HTML 500 of the list.
    response = client_.get(LIST, {"q": search})

    assert response.status_code == 200
    assert "No event has that id" in response.content.decode()


def test_an_htmx_refresh_gets_only_the_results_fragment(client_, policy, clock):
    event = new_event(clock.now())
    response = client_.get(LIST, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="results"')
    assert event.id in body
    assert "<html" not in body
    assert "HX-Request" in response["Vary"]


def test_the_full_page_polls_its_results_fragment(client_, policy):
    body = client_.get(LIST, {"region": "US"}).content.decode()
    assert 'hx-get="/?region=US" hx-trigger="every 5s"' in body


def test_a_dead_lease_holder_is_not_shown_as_the_owner(client_, policy, clock):
    held = new_event(clock.now())
    abandoned = new_event(clock.now())
    leases.take(held.id, "worker:alive:1", at=clock.now(), ttl=timedelta(seconds=60))
    leases.take(abandoned.id, "worker:dead:2", at=clock.now(), ttl=timedelta(seconds=5))
    clock.advance(10)

    page = client_.get(LIST).content.decode()
    owners = {row.event.id: row.owner_live for row in client_.get(LIST).context["rows"]}

    assert owners == {held.id: True, abandoned.id: False}
    assert "worker:alive:1" in page
    assert "worker:dead:2" not in page
    assert "nobody (lease expired at 12:00:05 UTC)" in page


def test_the_header_says_the_system_is_behind_once_a_due_step_waits_over_a_second(client_, policy, clock):
    new_event(clock.now())  # its SMS submit is due at once; no worker runs here
    clock.advance(1)
    on_time = client_.get(LIST)
    clock.advance(3)
    late = client_.get(LIST)

    assert "The system is behind" not in on_time.content.decode()
    assert "The system is behind" in late.content.decode()
    assert "the oldest due step has waited 4s for a worker" in late.content.decode()


def test_a_due_step_a_worker_holds_is_not_lag(client_, policy, clock):
    event = new_event(clock.now())
    leases.take(event.id, "worker:alive:1", at=clock.now(), ttl=timedelta(seconds=60))
    clock.advance(10)

    assert "The system is behind" not in client_.get(LIST).content.decode()
