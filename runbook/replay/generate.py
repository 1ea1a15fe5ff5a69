"""Production-shaped synthetic timings: heavy-tailed receipts, regional differences, lost receipts.

The shapes are assumptions written down, not measurements: medians and tails in line
with what SMS providers publish and what this project's simulator profile models. Use
``export_timings`` on your own production for the real thing.
"""

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from runbook.replay.timings import Timing


@dataclass(frozen=True)
class Shape:
    share: float  # of all records
    lifetime_s: float
    accept_median_s: float
    receipt_median_s: float
    # A tenth of receipts come from a Pareto tail with this index: the smaller, the heavier.
    receipt_tail_index: float
    delivered: float  # shares of SMS outcomes; the rest never gets a terminal receipt
    failed: float
    email_median_s: float
    email_failed: float
    # (template set, share of records, SMS segments): the shipped policies' languages, with Greek
    # and Polish in UCS-2 (two segments with a link), the rest in GSM-7 (one).
    locales: tuple[tuple[str, float, int], ...]


US_LOCALES = (("default", 0.8, 1), ("es", 0.2, 1))
EU_LOCALES = (
    ("default", 0.25, 1),
    ("de", 0.25, 1),
    ("fr", 0.18, 1),
    ("es", 0.1, 1),
    ("it", 0.1, 1),
    ("pl", 0.07, 2),
    ("el", 0.05, 2),
)
SHAPES = {
    "US": Shape(0.6, 600, 0.35, 5.0, 1.6, 0.87, 0.06, 1.0, 0.01, US_LOCALES),
    "EU": Shape(0.4, 900, 0.5, 12.0, 1.2, 0.82, 0.07, 1.5, 0.015, EU_LOCALES),
}
TAIL_SHARE = 0.1


def generate(count: int, seed: int, regions: tuple[str, ...] = ("US", "EU")) -> Iterator[Timing]:
    rng = random.Random(seed)
    # Languages from a stream of their own: the timings of a seed stay what they were before.
    languages = random.Random(f"{seed}:locales")
    shapes = [SHAPES[region] for region in regions]
    weights = [shape.share for shape in shapes]
    for _ in range(count):
        region = rng.choices(regions, weights)[0]
        shape = SHAPES[region]
        locale, _, segments = languages.choices(shape.locales, [share for _, share, _ in shape.locales])[0]
        yield _record(rng, region, shape)._replace(locale=locale, sms_segments=segments)


def _record(rng: random.Random, region: str, shape: Shape) -> Timing:
    accept = rng.lognormvariate(math.log(shape.accept_median_s), 0.5)
    roll = rng.random()
    if roll < shape.delivered + shape.failed:
        outcome = "delivered" if roll < shape.delivered else "failed"
        latency = rng.lognormvariate(math.log(shape.receipt_median_s), 0.7)
        if rng.random() < TAIL_SHARE:
            latency *= rng.paretovariate(shape.receipt_tail_index)
        terminal: float | None = accept + latency
    else:
        outcome, terminal = "none", None
    email_failed = rng.random() < shape.email_failed
    return Timing(
        region=region,
        lifetime_s=shape.lifetime_s,
        sms_accept_s=round(accept, 3),
        sms_terminal_s=round(terminal, 3) if terminal is not None else None,
        sms_outcome=outcome,
        email_accept_s=round(rng.lognormvariate(math.log(shape.email_median_s), 0.5), 3),
        email_outcome="failed" if email_failed else "accepted",
    )
