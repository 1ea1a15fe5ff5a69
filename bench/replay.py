"""replay_records_per_s: replayed records per second on one core, for 1,000,000 records.

The records come from the seeded generator (production-shaped: both regions, heavy
tails, lost receipts), each replayed once against its region's active policy, in
this one process. The ceiling is the same process only reading and validating the
same file: what the replay costs beyond getting the records in. The decision code runs compiled
where ``make native`` built it (config/native.py), and the line printed says which form ran.
"""

import tempfile
import time
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

from django.core.management import call_command

from runbook.replay import run, simulate, timings
from runbook.replay.generate import generate

RECORDS = 1_000_000


@dataclass(frozen=True)
class Rates:
    replayed: float
    read: float


def run_bench() -> Rates:
    call_command("load_policies", stdout=StringIO())
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "timings.csv"
        timings.write(path, generate(RECORDS, seed=1))
        begun = time.perf_counter()
        per_region = run.scan(path, None)
        read_rate = sum(per_region.values()) / (time.perf_counter() - begun)
        policies = {region: run.candidates(base, None) for region, base in run.baselines(per_region, None).items()}
        begun = time.perf_counter()
        results = run.replay(path, policies, region=None)
        replay_rate = RECORDS / (time.perf_counter() - begun)
    events = sum(counts.events for candidates in results.values() for counts in candidates.values())
    assert events == RECORDS, events
    form = "compiled" if simulate.__file__ and not simulate.__file__.endswith(".py") else "interpreted (make native)"
    print(f"  read and validated {read_rate:,.0f} records/s; replayed {replay_rate:,.0f} records/s ({form})")
    return Rates(replay_rate, read_rate)
