"""A recommendation, not a guess: the value of a field that meets every target with the fewest extra messages."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from runbook.models import Recommendation
from runbook.replay import recommend, timings
from runbook.replay.report import Target
from tests.factories import PolicyVersionFactory

# Delivered 90 s after the submit: an SMS budget under 90 s sends the email first, and the SMS
# then arrives too (an extra message); from 90 s on, the SMS alone. The factory policy: budget
# 60 s, reserve 120 s, so a 600 s link leaves 1-480 s of budget worth trying.
LATE = timings.Timing("US", 600, 0.5, 90, "delivered", 1, "accepted")
NEVER = timings.Timing("US", 600, 0.5, None, "none", 1, "accepted")
NO_EXTRA = [Target.parse("extra_messages<=0")]


def test_the_recommended_budget_is_the_smallest_change_that_sends_no_extra_message(db):
    base = PolicyVersionFactory.build()
    found = recommend.recommend("sms_budget", base, [LATE] * 10 + [NEVER] * 10, NO_EXTRA)

    assert found.value is not None
    assert 90 <= found.value <= 100  # to the fine step (10 s) above the receipt, nearest the baseline
    assert found.counts is not None
    assert found.counts.extra_messages == 0
    # Every value tried below the receipt did send extra messages, so none of them could be chosen.
    below = [counts for candidate, counts in found.tried.items() if candidate.value and float(candidate.value) < 90]
    assert below
    assert all(counts.extra_messages == 10 for counts in below)
    assert (found.low, found.high) == (1.0, 480.0)


def test_no_value_meeting_every_target_is_said_and_nothing_is_recommended(db):
    base = PolicyVersionFactory.build()
    # The page margin does not move the email's timing: at the 60 s budget every late SMS is an extra message.
    found = recommend.recommend("page_margin", base, [LATE] * 5, NO_EXTRA)
    assert found.value is None
    assert found.counts is None
    assert "US: no page_margin in 1-600 s meets every target" in recommend.summary(found, NO_EXTRA)
    assert "Nothing recommended" in recommend.summary(found, NO_EXTRA)


def test_a_target_is_required_and_only_searchable_fields_are_searched(db):
    base = PolicyVersionFactory.build()
    with pytest.raises(ValueError, match="needs at least one --target"):
        recommend.recommend("sms_budget", base, [LATE], [])
    with pytest.raises(ValueError, match="choose one of sms_budget, fallback_reserve, page_margin"):
        recommend.recommend("poll_interval", base, [LATE], NO_EXTRA)


def test_the_command_writes_the_recommendation_to_the_report_and_keeps_it_for_the_admin(tmp_path, db):
    base = PolicyVersionFactory.create()
    path = tmp_path / "late.csv"
    timings.write(path, [LATE] * 10)
    out = tmp_path / "out"
    call_command(
        "replay", str(path), "--recommend", "sms_budget", "--target", "extra_messages<=0", "--out", str(out),
        "--no-progress", stdout=StringIO(), stderr=StringIO(),
    )  # fmt: skip

    report = (out / "report.md").read_text()
    kept = Recommendation.objects.get()
    assert (kept.region, kept.field, kept.based_on, kept.targets) == ("US", "sms_budget", base, ["extra_messages <= 0"])
    assert 90 <= float(kept.value) <= 100
    assert kept.figures["extra_messages"] == 0
    assert kept.records == 10
    assert f"US: sms_budget = {kept.value} s meets every target" in report


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--recommend", "sms_budget"], "needs at least one --target"),
        (["--recommend", "lease_ttl", "--target", "extra_messages<=0"], "choose one of"),
        (["--recommend", "sms_budget", "--vary", "sms_budget=30", "--target", "extra_messages<=0"], "leave --vary out"),
    ],
)
def test_the_command_refuses_a_search_it_cannot_do_and_writes_nothing(tmp_path, db, args, message):
    PolicyVersionFactory.create()
    path = tmp_path / "late.csv"
    timings.write(path, [LATE])
    with pytest.raises(CommandError, match=message):
        call_command("replay", str(path), "--out", str(tmp_path / "out"), "--no-progress", *args, stdout=StringIO())
    assert not (tmp_path / "out").exists()
    assert not Recommendation.objects.exists()
