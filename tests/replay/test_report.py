"""What the summary and the report count, from replayed outcomes."""

import csv

from notify.rules.vocabulary import State
from runbook.replay.report import Candidate, Counts, Target, write_report, write_summary
from runbook.replay.simulate import Replayed

BASELINE = Candidate("baseline", "")


def test_an_email_not_sent_for_lack_of_useful_life_is_counted_and_can_be_a_target(tmp_path):
    counts = Counts()
    counts.add(Replayed(State.EMAIL_FAILED, no_useful_life=True))
    counts.add(Replayed(State.EMAIL_ACCEPTED, email_accepted=True))
    results = {"US": {BASELINE: counts}}

    write_summary(tmp_path / "summary.csv", results)
    write_report(tmp_path / "report.md", results, source="t.csv", baseline="US v1", targets=[])

    with (tmp_path / "summary.csv").open() as file:
        (row,) = csv.DictReader(file)
    assert (row["fallbacks_without_useful_life"], row["extra_messages"]) == ("1", "0")
    assert "| fallbacks without useful life |" in (tmp_path / "report.md").read_text()
    assert not Target.parse("fallbacks_without_useful_life<=0").met(counts)
    assert Target.parse("fallbacks_without_useful_life<=50%").met(counts)
