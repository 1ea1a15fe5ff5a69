"""`make bench`: every figure with its ceiling, measured side by side in one run."""

import os
import sys
from typing import TYPE_CHECKING

import django

if TYPE_CHECKING:
    from bench import e2e


def main(selected: list[str]) -> None:
    """Run every benchmark, or only those named on the command line (cas, api, console, replay, e2e, e2e-profile)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from bench import api, api_parts, api_stages, cas, console, database, e2e, replay, results

    def wanted(name: str) -> bool:
        return not selected or name in selected

    database.prepare()
    if wanted("cas"):
        print("cas:")
        project, raw = cas.run()
        results.record("cas_transitions_per_s", project, "transitions/s (8 workers)", raw)
    if wanted("api"):
        print("api:")
        served = api.run()
        results.record("api_creations_per_s", served.create.rate, "events/s created over HTTP", served.ceiling.rate)
        results.record("api_create_p50_ms", served.create.p50_ms, "ms per creation, median", served.ceiling.p50_ms)
        results.record("api_create_p99_ms", served.create.p99_ms, "ms per creation, p99", served.ceiling.p99_ms)
        results.record(
            "api_create_web_cpu_ms", served.create.cpu_ms, "ms web CPU per creation; ceiling: per whoami",
            served.ceiling.cpu_ms,
        )  # fmt: skip
        results.record(
            "api_create_db_cpu_ms", served.create.db_cpu_ms, "ms PostgreSQL CPU per creation; ceiling: per whoami",
            served.ceiling.db_cpu_ms,
        )  # fmt: skip
        # The targets as ceilings: at 100 creations/s offered open-loop, p50 under
        # 10 ms and p99 under 50 ms; a signed callback under 1.5 ms of web CPU.
        offered = f"at {api.OPEN_LOOP_RATE:g}/s offered open-loop; ceiling: the target"
        results.record("api_open_loop_p50_ms", served.open_loop.p50_ms, f"ms per creation, median, {offered}", 10)
        results.record("api_open_loop_p99_ms", served.open_loop.p99_ms, f"ms per creation, p99, {offered}", 50)
        beside = f"{offered}, beside {api.HEAVY_CLIENTS} clients fetching {api.HEAVY_PATH}"
        results.record("api_open_loop_heavy_p99_ms", served.open_loop_beside_heavy.p99_ms, f"ms p99 {beside}", 50)
        callback_unit = "ms web CPU per signed status callback; ceiling: the target"
        results.record("api_callback_web_cpu_ms", served.callback.cpu_ms, callback_unit, 1.5)
        results.record("api_callbacks_per_s", served.callback.rate, "status callbacks/s, 16 in flight", None)
        creation, callback = api_parts.run()
        print(api_parts.table("a creation's parts", creation))
        print(api_parts.table("a callback's parts", callback))
        results.record(
            "api_creation_parts_cpu_ms", sum(part.cpu_ms for part in creation),
            "ms CPU, a creation's parts in isolation (bench/api_parts.py)", None,
        )  # fmt: skip
        results.record(
            "api_callback_parts_cpu_ms", sum(part.cpu_ms for part in callback),
            "ms CPU, a callback's parts in isolation (bench/api_parts.py)", None,
        )  # fmt: skip
        stages = api_stages.run()
        print(api_stages.table(stages))
        in_process = "through Django's handler in this process (bench/api_stages.py)"
        results.record(
            "api_create_in_process_cpu_ms", stages.total("creation"),
            f"ms CPU per creation {in_process}; ceiling: per whoami", stages.total("whoami"),
        )  # fmt: skip
        results.record(
            "api_callback_in_process_cpu_ms", stages.total("callback"),
            f"ms CPU per signed callback {in_process}; ceiling: per whoami", stages.total("whoami"),
        )  # fmt: skip
    if wanted("console"):
        print("console:")
        pages = console.run()
        floor = pages.empty
        unit = "ms server time, 1M events; ceiling: empty template"
        results.record("console_list_p50_ms", pages.listing.p50_ms, f"list {unit}", floor.p50_ms)
        results.record("console_list_p99_ms", pages.listing.p99_ms, f"list {unit}", floor.p99_ms)
        results.record("console_event_p50_ms", pages.event.p50_ms, f"event page {unit}", floor.p50_ms)
        results.record("console_event_p99_ms", pages.event.p99_ms, f"event page {unit}", floor.p99_ms)
    if wanted("replay"):
        print("replay:")
        rates = replay.run_bench()
        results.record("replay_records_per_s", rates.replayed, "records/s replayed, one core (CPU time)", rates.read)
    if wanted("e2e") or wanted("e2e-profile"):
        print("e2e:")
        _record_e2e(e2e.run(profile=wanted("e2e-profile") and bool(selected)))
    results.print_table()


def _record_e2e(figures: "e2e.Figures") -> None:
    """One figure per measure and load, named ``e2e_<multiple>x_<measure>``; each ceiling is the
    issue's target for it, or none where it sets none."""
    from bench import e2e, results

    unit = "events/s offered with the lateness p99 under 1 s (bench/e2e.py)"
    results.record("e2e_capacity_per_s", figures.capacity, unit, 100)
    for multiple, load in figures.loads:
        bound = e2e.BOUND_MS if multiple <= 1 else None
        excess_s = (multiple - 1) * e2e.SECONDS if multiple > 1 else None
        for measure, value, unit, ceiling in (
            ("created_per_s", load.created_per_s, "events/s created", load.offered_per_s),
            ("terminal_per_s", load.terminal_per_s, "events/s reaching a terminal state", load.offered_per_s),
            ("claim_p50_ms", load.events.claim_late_ms[0], "ms fallback allowed -> claimed, p50", None),
            ("claim_p99_ms", load.events.claim_late_ms[1], "ms fallback allowed -> claimed, p99", bound),
            ("claim_max_ms", load.events.claim_late_ms[2], "ms fallback allowed -> claimed, max", None),
            ("submit_p50_ms", load.events.submit_late_ms[0], "ms fallback allowed -> email submitted, p50", None),
            ("submit_p99_ms", load.events.submit_late_ms[1], "ms fallback allowed -> email submitted, p99", None),
            ("submit_max_ms", load.events.submit_late_ms[2], "ms fallback allowed -> email submitted, max", None),
            ("first_step_p99_ms", load.events.first_step_late_ms[1], "ms created -> first step, p99", bound),
            ("first_step_short_p99_ms", load.events.first_step_p99_ms["short"], "ms to first step, short links", None),
            ("first_step_long_p99_ms", load.events.first_step_p99_ms["long"], "ms to first step, long links", None),
            ("useful_short_pct", load.events.useful_pct["short"], "% short-lifetime events with a useful message", 99),
            ("useful_long_pct", load.events.useful_pct["long"], "% long-lifetime events with a useful message", None),
            ("expired_unclaimed", load.events.expired_unclaimed, "events expired with the fallback unclaimed", 0),
            ("backlog", load.backlog, "events overdue > 1 s as the offering ended", None),
            # Draining at the capacity, the excess offered over it takes (multiple - 1) x the offering.
            ("drain_s", load.drain_s, "s until none overdue > 1 s; ceiling: the excess at capacity", excess_s),
            ("web_ms_per_creation", load.web_ms_per_creation, "ms web CPU per creation", None),
            ("worker_ms_per_step", load.worker_ms_per_step, "ms worker CPU per step", 5),
        ):
            results.record(f"e2e_{multiple:g}x_{measure}", value, unit, ceiling)
        if multiple == 1:
            worker_rss = f"MB step worker RSS, {e2e.WORKERS} processes, after 1x"
            results.record("e2e_worker_rss_mb", load.worker_rss_mb, worker_rss, None)


if __name__ == "__main__":
    main(sys.argv[1:])
