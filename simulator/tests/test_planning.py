import random
import tomllib
from typing import Any

from simulator.faults import CallbackFault, CreateFault, SmtpFault
from simulator.messages import StatusChange
from simulator.planning import Planner
from simulator.profile import DEFAULT_PROFILE, load_profile, parse_profile
from simulator.scripts import EmailScript, SmsScript

US = "+15551230001"


def planner(seed: int = 1, document: dict[str, Any] | None = None) -> Planner:
    profile = parse_profile(document) if document else load_profile(DEFAULT_PROFILE)
    return Planner(profile, random.Random(seed))


def certain_document() -> dict[str, Any]:
    """Return the default profile where US numbers are always rejected and never get a receipt."""
    document = tomllib.loads(DEFAULT_PROFILE.read_text())
    us = document["sms"]["regions"]["us"]
    us["create_faults"] = {"reject": 1.0}
    us["outcomes"] = {"no_receipt": 1}
    document["smtp"]["faults"] = {"perm_fail": 1.0}
    return document


def test_script_steps_are_served_one_per_call_and_the_last_repeats():
    plans = planner()
    plans.add(SmsScript(to=US, create=(CreateFault.ACCEPT_THEN_DROP, CreateFault.REJECT, CreateFault.ACCEPT)))

    served = [plans.plan_sms(US).create for _ in range(5)]

    assert served == [CreateFault.ACCEPT_THEN_DROP, CreateFault.REJECT] + [CreateFault.ACCEPT] * 3


def test_scripting_a_destination_again_restarts_its_steps():
    plans = planner()
    script = SmsScript(to=US, create=(CreateFault.HANG, CreateFault.ACCEPT))
    plans.add(script)
    plans.plan_sms(US)

    plans.add(script)

    assert plans.plan_sms(US).create is CreateFault.HANG


def test_an_unscripted_destination_is_drawn_from_its_region():
    plans = planner(document=certain_document())

    assert plans.plan_sms(US).create is CreateFault.REJECT
    assert [change.status for change in plans.plan_sms(US).timeline] == ["sent"]


def test_a_script_without_statuses_takes_its_timeline_from_the_profile():
    plans = planner(document=certain_document())
    plans.add(SmsScript(to=US))

    plan = plans.plan_sms(US)

    assert plan.create is CreateFault.ACCEPT
    assert [change.status for change in plan.timeline] == ["sent"]


def test_a_scripted_timeline_and_callback_fault_replace_the_profile():
    plans = planner(document=certain_document())
    timeline = (StatusChange("failed", 0.1),)
    plans.add(SmsScript(to=US, statuses=timeline, callbacks=CallbackFault.REORDER, callback_delay=0.5))

    plan = plans.plan_sms(US)

    assert (plan.timeline, plan.callbacks, plan.callback_delay) == (timeline, CallbackFault.REORDER, 0.5)


def test_a_drawn_timeline_ends_after_it_is_sent():
    plan = planner().plan_sms(US)

    assert plan.timeline[0].status == "sent"
    assert all(later.after_seconds >= plan.timeline[0].after_seconds for later in plan.timeline)


def test_the_same_seed_draws_the_same_plans():
    first, second = planner(seed=7), planner(seed=7)

    assert [first.plan_sms(US) for _ in range(20)] == [second.plan_sms(US) for _ in range(20)]


def test_clearing_forgets_every_script():
    plans = planner(document=certain_document())
    plans.add(SmsScript(to=US, create=(CreateFault.ACCEPT,)))
    plans.add(EmailScript(address="a@example.com", smtp=(SmtpFault.ACCEPT,)))

    plans.clear()

    assert plans.plan_sms(US).create is CreateFault.REJECT
    assert plans.plan_email(["a@example.com"]).fault is SmtpFault.PERM_FAIL


def test_the_first_scripted_recipient_decides_an_email_whatever_the_case():
    plans = planner(document=certain_document())
    plans.add(EmailScript(address="B@Example.com", smtp=(SmtpFault.DROP_AFTER_DATA,), hang_seconds=3))

    plan = plans.plan_email(["a@example.com", "b@example.COM"])

    assert (plan.fault, plan.hang_seconds) == (SmtpFault.DROP_AFTER_DATA, 3.0)
