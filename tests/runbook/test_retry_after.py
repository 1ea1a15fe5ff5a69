"""A pager's Retry-After, whatever its shape, is read without raising and never asks for more than the cap.

A raise here aborted the whole delivery wave, and the pages sent in it but not yet recorded
went out again on the next one; a header is the pager's input, so no value of it may do that.
"""

from datetime import UTC, datetime, timedelta

from hypothesis import example, given
from hypothesis import strategies as st

from runbook.paging.pagerduty import LONGEST_PAUSE, retry_after

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

# Zones an HTTP date may end with: GMT as RFC 9110 requires, and what pagers send anyway:
# numeric offsets (-0000 is RFC 5322's "UTC, local zone unknown", parsed as a naive time),
# obsolete names, and ones no parser knows.
ZONES = st.sampled_from(
    ["GMT", "UTC", "UT", "Z", "-0000", "+0000", "+0100", "-0800", "+2359", "-9999", "EST", "XYZ", ""]
)
DATES = st.builds(lambda when, zone: when.strftime("%a, %d %b %Y %H:%M:%S ") + zone, st.datetimes(), ZONES)
HEADERS = st.one_of(
    st.text(),
    st.integers().map(str),  # huge and negative ones included
    st.integers(min_value=0).map(lambda n: "0" * 5 + str(n)),
    st.floats().map(str),
    DATES,
    st.builds(lambda date, junk: date + junk, DATES, st.text(max_size=5)),
)


@given(header=HEADERS | st.none())
@example(header="99999999999999")  # timedelta cannot hold that many seconds
@example(header="9" * 5000)  # int() refuses a string of more than 4,300 digits
@example(header="Fri, 01 Jan 2026 12:00:30 -0000")  # a naive time, against an aware now
@example(header="01 Jan 99999999999999999999 00:00:00 GMT")  # a year past a C long
@example(header="\u0663")  # a digit to str.isdigit, not to RFC 9110
@example(header="\u00b2")  # str.isdigit, and int() refuses it
def test_any_retry_after_is_read_without_raising_as_nothing_or_a_capped_pause(header):
    pause = retry_after(header, NOW)

    assert pause is None or timedelta(0) <= pause <= LONGEST_PAUSE


def test_a_date_in_unknown_local_time_is_read_as_utc():
    assert retry_after("Thu, 01 Jan 2026 12:00:30 -0000", NOW) == timedelta(seconds=30)


def test_seconds_past_what_a_timedelta_holds_are_the_cap():
    assert retry_after("99999999999999", NOW) == LONGEST_PAUSE


def test_only_ascii_digits_are_seconds():
    assert retry_after("\u0663", NOW) is None  # ARABIC-INDIC DIGIT THREE
