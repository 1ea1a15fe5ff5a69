import statistics

from hypothesis import given
from hypothesis import strategies as st

from bench.stats import spread

MILLISECONDS = st.floats(min_value=0, max_value=1e6, allow_nan=False)


@given(st.lists(MILLISECONDS, min_size=1))
def test_it_orders_median_p99_and_max_between_the_samples(values):
    p50, p99, top = spread(values)
    assert min(values) <= p50 <= p99 <= top == max(values)


def test_its_p99_never_exceeds_the_max_where_the_exclusive_method_does():
    values = [float(value) for value in range(1, 51)]
    assert statistics.quantiles(values, n=100)[98] > max(values)  # the sample the old helpers got wrong
    assert spread(values) == (25.5, 49.51, 50.0)


def test_it_reports_zeros_for_no_samples_and_the_sample_for_one():
    assert spread([]) == (0.0, 0.0, 0.0)
    assert spread([7.0]) == (7.0, 7.0, 7.0)
