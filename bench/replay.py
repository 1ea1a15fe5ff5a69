"""replay_records_per_s: replayed records per second on one core, for 1,000,000 records.

The records come from the seeded generator (production-shaped: both regions, heavy
tails, lost receipts), each replayed once against its region's active policy, in
this one process. The ceiling is the same process only reading and validating the
same file: what the replay costs beyond getting the records in. The decision code runs compiled
where ``make native`` built it (config/native.py), and the line printed says which form ran.

Both passes are timed in this process's CPU time (``time.process_time``), which is what "on one
core" asks: wall time charged the replay with whatever else the 2-core machine ran meanwhile.
In a whole ``make bench`` the replay follows the console's million-event load: by wall time the
ratio read 0.137 there against 0.163 for the same code run alone (docs/benchmarks.md).
The wall-time rates are printed beside.
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
        with _Timed() as read:
            per_region = run.scan(path, None)
        policies = {region: run.candidates(base, None) for region, base in run.baselines(per_region, None).items()}
        with _Timed() as replayed:
            results = run.replay(path, policies, region=None)
    events = sum(counts.events for candidates in results.values() for counts in candidates.values())
    assert events == RECORDS, events
    form = "compiled" if simulate.__file__ and not simulate.__file__.endswith(".py") else "interpreted (make native)"
    read_records = sum(per_region.values())
    print(
        f"  read and validated {read_records / read.cpu:,.0f} records/s; replayed {RECORDS / replayed.cpu:,.0f}"
        f" records/s ({form}), in CPU time; by wall time {read_records / read.wall:,.0f} and"
        f" {RECORDS / replayed.wall:,.0f}"
    )
    return Rates(RECORDS / replayed.cpu, read_records / read.cpu)


class _Timed:
    """The CPU time (this process's) and the wall time a block took, in seconds."""

    cpu = wall = 0.0

    def __enter__(self) -> "_Timed":
        self._cpu, self._wall = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cpu, self.wall = time.process_time() - self._cpu, time.perf_counter() - self._wall
