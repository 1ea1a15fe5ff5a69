"""The commands: generate, export, replay; what they write, and how they refuse bad input."""

import csv
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from runbook.replay import timings
from runbook.replay.report import SUMMARY_COLUMNS
from tests.factories import PolicyVersionFactory

HEADER = ",".join(timings.HEADER)
HEADER_V1 = ",".join(timings.HEADER_V1)  # still read
HEADER_V2 = ",".join(timings.HEADER_V2)  # still read


@pytest.fixture
def regions(db):
    PolicyVersionFactory.create(region="US")
    PolicyVersionFactory.create(region="EU", allowed_sms_country_codes=[44])


def generated(tmp_path: Path, count: int = 400, seed: int = 7) -> Path:
    path = tmp_path / f"timings-{seed}.csv"
    call_command("generate_timings", count=count, seed=seed, out=path, stdout=StringIO())
    return path


def replay(path: Path, out: Path, *args: str) -> None:
    call_command("replay", str(path), "--out", str(out), "--no-progress", *args, stdout=StringIO())


def test_generated_timings_are_in_the_format_and_the_same_for_the_same_seed(tmp_path):
    first, again, other = generated(tmp_path), generated(tmp_path / "..", seed=7), generated(tmp_path, seed=8)
    assert first.read_text() == again.read_text()
    assert first.read_text() != other.read_text()
    rows = list(timings.read(first))
    assert len(rows) == 400
    assert {row.region for row in rows} == {"US", "EU"}
    assert {row.sms_outcome for row in rows} == {"delivered", "failed", "none"}
    # Heavy-tailed: the slowest receipts are many times the median.
    latencies = sorted(row.sms_terminal_s for row in rows if row.sms_terminal_s is not None)
    assert latencies[-1] > 5 * latencies[len(latencies) // 2]


def test_generated_timings_speak_the_shipped_languages_with_their_segments(tmp_path):
    rows = list(timings.read(generated(tmp_path)))

    assert {row.locale for row in rows if row.region == "US"} == {"default", "es"}
    assert {row.locale for row in rows if row.region == "EU"} == {"default", "de", "fr", "es", "it", "pl", "el"}
    assert {row.sms_segments for row in rows if row.locale in ("pl", "el")} == {2}


def test_the_report_counts_messages_and_sms_segments_by_template_set(tmp_path, regions):
    path = tmp_path / "timings.csv"
    path.write_text(
        f"{HEADER}\n"
        "EU,900,0.5,5,delivered,1,accepted,callback,,,el,2\n"
        "EU,900,0.5,5,delivered,1,accepted,callback,,,el,2\n"
        "EU,900,0.5,5,delivered,1,accepted,callback,,,de,1\n"
        "EU,900,0.5,,none,1,accepted,,,,default,\n"  # no receipt: the email goes out too
    )
    out = tmp_path / "out"

    replay(path, out)

    report = (out / "report.md").read_text()
    assert "| template set | events | SMS sent | SMS segments | segments per reset | emails sent |" in report
    assert "| el | 2 | 2 | 4 | 2.00 | 0 |" in report
    assert "| de | 1 | 1 | 1 | 1.00 | 0 |" in report
    assert "| default | 1 | 1 | 1 | 1.00 | 1 |" in report  # unrecorded segments count one
    with (out / "summary.csv").open() as file:
        [row] = [row for row in csv.DictReader(file) if row["region"] == "EU"]
    assert row["sms_segments_per_reset"] == "1.5"


def test_replay_writes_the_summary_report_and_plots(tmp_path, regions):
    out = tmp_path / "out"
    replay(generated(tmp_path), out, "--vary", "sms_budget=30,60,90", "--target", "extra_messages<=5%")
    assert sorted(path.name for path in out.iterdir()) == [
        "remaining_lifetime.png",
        "report.md",
        "summary.csv",
        "tradeoff.png",
    ]
    with (out / "summary.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert list(rows[0]) == SUMMARY_COLUMNS
    # The baseline first (where each region stands today), then each candidate.
    assert [(row["region"], row["field"], row["value"]) for row in rows] == [
        (region, field, value)
        for region in ("EU", "US")
        for field, value in [("baseline", ""), ("sms_budget", "30"), ("sms_budget", "60"), ("sms_budget", "90")]
    ]
    assert sum(int(row["events"]) for row in rows) == 4 * 400
    assert all(row["pages_without_action"] == "0" for row in rows)
    # A longer SMS budget never sends more extra messages.
    for region in ("EU", "US"):
        extra = [int(row["extra_messages"]) for row in rows if row["region"] == region and row["field"] != "baseline"]
        assert extra == sorted(extra, reverse=True)
    report = (out / "report.md").read_text()
    assert "Targets: extra_messages <= 5%" in report
    assert "✔" in report
    assert (out / "tradeoff.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_same_input_gives_the_same_report(tmp_path, regions):
    path = generated(tmp_path)
    replay(path, tmp_path / "one", "--vary", "fallback_reserve=120,200")
    replay(path, tmp_path / "two", "--vary", "fallback_reserve=120,200")
    for name in ("summary.csv", "report.md"):
        assert (tmp_path / "one" / name).read_text() == (tmp_path / "two" / name).read_text()


def test_one_region_and_a_named_policy_version(tmp_path, regions):
    PolicyVersionFactory.create(region="US", number=9, status="retired", sms_budget=timedelta(seconds=30))
    out = tmp_path / "out"
    replay(generated(tmp_path), out, "--region", "US", "--policy-version", "9")
    with (out / "summary.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert [(row["region"], row["field"]) for row in rows] == [("US", "baseline")]
    assert "Baseline: US v9" in (out / "report.md").read_text()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("region,lifetime_s\nUS,600\n", "row 1 (header): missing columns: sms_accept_s, sms_terminal_s"),
        (f"{HEADER_V1}\nUS,600,-1,5,delivered,1,accepted\n", "row 2: sms_accept_s must be a non-negative number"),
        (f"{HEADER_V1}\nUS,600,0.5,5,delivered,1,accepted\nXX,600,0.5,5,delivered,1,accepted\n", "row 3: region 'XX'"),
        (f"{HEADER_V1}\nUS,600,0.5,,delivered,1,accepted\n", "row 2: sms_terminal_s must be empty exactly when"),
        (f"{HEADER_V1}\nUS,600,0.5,5,lost,1,accepted\n", "row 2: sms_outcome must be one of"),
        (f"{HEADER_V1}\nUS,abc,0.5,5,delivered,1,accepted\n", "row 2: lifetime_s must be a number of seconds"),
        (f"{HEADER}\nUS,600,0.5,5,delivered,1,accepted,callback\n", "row 2: expected 12 fields, found 8"),
        (f"{HEADER_V2}\nUS,600,0.5,5,delivered,1,accepted,push,,\n", "row 2: sms_receipt must be one of callback"),
        (f"{HEADER_V2}\nUS,600,0.5,,none,1,accepted,,0.2:sent,\n", "row 2: sms_calls answers must be one of"),
        (f"{HEADER_V2}\nUS,600,0.5,,none,1,accepted,,,x:accepted\n", "row 2: email_calls must be a number of seconds"),
        (f"{HEADER}\nUS,600,0.5,5,delivered,1,accepted,callback,,,de AT,1\n", "row 2: locale must be a locale key"),
        (f"{HEADER}\nUS,600,0.5,5,delivered,1,accepted,callback,,,de,0\n", "row 2: sms_segments must be a positive"),
        # A digit int() does not read (superscript two) is refused as clearly as a zero.
        (f"{HEADER}\nUS,600,0.5,5,delivered,1,accepted,callback,,,de,²\n", "row 2: sms_segments must be a positive"),
        (f"{HEADER_V1}\nUS,600,nan,5,delivered,1,accepted\n", "row 2: sms_accept_s must be a non-negative number"),
        (f"{HEADER_V1}\nUS,600,0.5,inf,delivered,1,accepted\n", "row 2: sms_terminal_s must be a non-negative number"),
        (f"{HEADER_V2}\nUS,600,0.5,5,delivered,1,accepted,,,\n", "row 2: sms_receipt must be one of callback"),
    ],
)
def test_bad_timings_are_refused_naming_the_row_and_nothing_is_written(tmp_path, regions, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    out = tmp_path / "out"
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        replay(path, out)
    assert not out.exists()


@pytest.mark.parametrize(
    ("vary", "message"),
    [
        ("fallback_reserve=3", "--vary fallback_reserve=3 makes an invalid US policy: fallback_reserve .* must cover"),
        ("sms_budget=-5", "sms_budget must be positive"),
        ("colour=1,2", "'colour' is not a policy field replay can vary"),
        ("sms_budget=", "give the candidate values"),
        ("sms_budget=soon", "'soon' is not a number"),
    ],
)
def test_an_invalid_candidate_is_refused_before_anything_runs(tmp_path, regions, vary, message):
    out = tmp_path / "out"
    with pytest.raises(CommandError, match=message):
        replay(generated(tmp_path, count=20), out, "--vary", vary)
    assert not out.exists()


def test_a_bad_target_is_refused(tmp_path, regions):
    with pytest.raises(CommandError, match="target 'speed<=3'"):
        replay(generated(tmp_path, count=20), tmp_path / "out", "--target", "speed<=3")
