"""The console where responders are: every page at a phone's width and a desktop's, light and dark.

At 390 x 844 (a phone) and 1400 x 1000 (a desktop), in both colour schemes, each console page
must not scroll sideways and must have no serious or critical accessibility violation as
axe-core (installed from npm by the project's set-up, injected here into Debian's Chromium)
reports them, at-risk rows and the runbook panel included. On a phone the event page's four
answers are above the fold; the runbook's actions are reachable by keyboard with a visible focus;
a responder who follows a page's link while logged out lands on that event after logging in.
"""

from datetime import timedelta
from pathlib import Path

import pytest
from playwright.sync_api import expect

from notify.rules.vocabulary import State
from plumbing.clock import system_clock
from runbook.models import Page, PageMode
from tests.browser.conftest import PASSWORD
from tests.factories import PolicyVersionFactory, new_event
from tests.notify.workers import next_phone
from tests.runbook.events import event_in

pytestmark = pytest.mark.django_db(transaction=True)

AXE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1400, "height": 1000}
WIDTHS = {"phone": PHONE, "desktop": DESKTOP}
SCHEMES = ("light", "dark")


@pytest.fixture
def at_risk(db, simulator):
    """An open event already inside its page margin (the margin is longer than its whole budget)."""
    PolicyVersionFactory.create(page_margin=timedelta(minutes=20), sms_budget=timedelta(seconds=240))
    phone = next_phone()
    simulator.control.script_sms(phone, create=["accept"], callbacks="drop")
    event = new_event(system_clock.now(), phone=phone)
    Page.objects.create(
        event=event, region=event.region, mode=PageMode.OBSERVE, opened_at=system_clock.now(),
        state=State.SMS_REQUESTED, next_action="submit_sms", budget_seconds=500,
    )  # fmt: skip
    return event


def _context(browser, width: str, scheme: str):
    # bypass_csp: axe is injected as a script of the test's own; the console's CSP allows only its own.
    return browser.new_context(viewport=WIDTHS[width], color_scheme=scheme, bypass_csp=True)


def _log_in(page, live_server, next_path: str = "/") -> None:
    page.goto(f"{live_server.url}/accounts/login/?next={next_path}")
    page.fill("#id_username", "rita")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()


def _sideways(page) -> int:
    """How far the page scrolls sideways, in CSS pixels (0: not at all)."""
    return int(page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth"))


def _serious_violations(page) -> list[str]:
    page.add_script_tag(path=str(AXE))
    return list(
        page.evaluate(
            """async () => {
                const results = await axe.run(document, {resultTypes: ["violations"]});
                return results.violations
                    .filter(v => v.impact === "serious" || v.impact === "critical")
                    .map(v => `${v.id} (${v.impact}): ${v.nodes.map(n => n.target.join(" ")).join(", ")}`);
            }"""
        )
    )


def _paths(event_id: str) -> dict[str, str]:
    return {"list": "/", "event": f"/events/{event_id}", "follow-ups": "/follow-ups", "pages": "/pages"}


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("width", list(WIDTHS))
def test_no_console_page_scrolls_sideways_or_fails_axe(browser, live_server, responder, at_risk, width, scheme):
    context = _context(browser, width, scheme)
    page = context.new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    problems = {"login": (_sideways(page), _serious_violations(page))}
    _log_in(page, live_server)
    for name, path in _paths(at_risk.id).items():
        page.goto(f"{live_server.url}{path}")
        if name == "event":
            page.locator("#runbook summary").click()  # the runbook panel open, as a responder reads it
        problems[name] = (_sideways(page), _serious_violations(page))
    context.close()
    assert set(problems) == {"login", "list", "event", "follow-ups", "pages"}
    assert {name: found for name, found in problems.items() if found != (0, [])} == {}


def test_the_list_on_a_phone_is_one_card_per_event_with_the_budget_first(browser, live_server, responder, at_risk):
    context = _context(browser, "phone", "light")
    page = context.new_page()
    _log_in(page, live_server)
    card = page.locator(f'tr[data-event="{at_risk.id}"]')
    budget, state = card.locator("td[data-budget]"), card.locator("td[data-state]")
    expect(budget).to_contain_text("at risk")  # the mark is text, not colour alone
    assert budget.bounding_box()["y"] < state.bounding_box()["y"], "the budget is not first on the card"
    assert card.bounding_box()["width"] <= PHONE["width"]
    # The filters fold away behind one control.
    expect(page.locator("#region")).to_be_hidden()
    page.get_by_role("button", name="Filters").click()
    expect(page.locator("#region")).to_be_visible()
    context.close()


def test_the_four_answers_are_above_the_fold_on_a_phone(browser, live_server, responder, at_risk):
    context = _context(browser, "phone", "light")
    page = context.new_page()
    _log_in(page, live_server)
    page.goto(f"{live_server.url}/events/{at_risk.id}")
    answers = page.locator(".answer")
    expect(answers).to_have_count(4)
    for index in range(4):
        box = answers.nth(index).bounding_box()
        assert box is not None
        assert box["y"] + box["height"] <= PHONE["height"], f"answer {index + 1} is below the fold"
    # The timeline is laid out for the narrow screen, not the wide one scaled down.
    expect(page.locator("svg.timeline.narrow")).to_be_visible()
    expect(page.locator("svg.timeline.wide")).to_be_hidden()
    context.close()


def test_the_runbook_actions_are_reachable_by_keyboard_with_a_visible_focus(browser, live_server, responder, db):
    PolicyVersionFactory.create(sms_budget=timedelta(seconds=240))
    event = new_event(system_clock.now(), phone=next_phone())
    context = _context(browser, "phone", "light")
    page = context.new_page()
    _log_in(page, live_server)
    page.goto(f"{live_server.url}/events/{event.id}")

    reached = []
    for _ in range(60):
        page.keyboard.press("Tab")
        focused = page.evaluate(
            """() => {
                const el = document.activeElement;
                const style = getComputedStyle(el);
                return {text: (el.innerText || el.value || "").trim(), tag: el.tagName,
                        outline: style.outlineStyle !== "none" && style.outlineWidth !== "0px"};
            }"""
        )
        reached.append(focused)
        if focused["text"].startswith("Runbook:"):
            break
    assert reached[-1]["text"].startswith("Runbook:"), [item["text"] for item in reached]
    assert all(item["outline"] for item in reached if item["tag"] != "BODY"), "a focused control showed no focus"
    page.keyboard.press("Enter")  # opens the panel from the keyboard
    expect(page.locator("#runbook")).to_have_attribute("open", "")
    context.close()


def test_a_responder_following_a_page_link_on_a_phone_lands_on_the_event_after_logging_in(
    browser, live_server, responder, at_risk
):
    context = _context(browser, "phone", "light")
    page = context.new_page()
    page.goto(f"{live_server.url}/events/{at_risk.id}")  # the page's link, logged out

    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/events/{at_risk.id}")
    page.fill("#id_username", "rita")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()

    expect(page).to_have_url(f"{live_server.url}/events/{at_risk.id}")
    expect(page.locator(".answer").first).to_be_visible()
    assert _sideways(page) == 0
    context.close()


def test_a_runbook_action_is_taken_by_keyboard_alone(browser, live_server, responder, db):
    PolicyVersionFactory.create(sms_budget=timedelta(seconds=240))
    failed = event_in(State.SMS_FAILED, system_clock, phone=next_phone())
    context = _context(browser, "phone", "light")
    page = context.new_page()
    _log_in(page, live_server)
    page.goto(f"{live_server.url}/events/{failed.id}")

    for _ in range(60):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.innerText || ''").strip() == "Claim the email fallback now":
            break
    else:
        raise AssertionError("the fallback's claim was never reached by Tab")
    page.keyboard.press("Enter")

    expect(page.locator(".messages")).to_contain_text("Email fallback claimed")
    expect(page.locator("[data-state]").first).to_have_text(State.EMAIL_CLAIMED)
    context.close()
