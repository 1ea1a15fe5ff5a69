"""The one place the benchmarks turn samples into the figures they print: median, p99, max."""

import statistics
from collections.abc import Sequence


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """Return the median, the 99th percentile and the maximum of ``values`` (zeros when there are none).

    The percentile interpolates between observed values ("inclusive"): the default
    "exclusive" method extrapolates past the extremes of a small sample, and printed a p99
    above the max.
    """
    if not values:
        return (0.0, 0.0, 0.0)
    median, top = statistics.median(values), max(values)
    if len(values) == 1:
        return (median, median, top)
    p99 = statistics.quantiles(values, n=100, method="inclusive")[98]
    # The interpolation's rounding can land an ulp outside the two values it lies between.
    return (median, min(max(p99, median), top), top)
