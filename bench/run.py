"""`make bench`: every figure with its ceiling, measured side by side in one run."""

import os
import sys

import django


def main(selected: list[str]) -> None:
    """Run every benchmark, or only those named on the command line (cas, api, console, replay, e2e, e2e-profile)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from bench import api, cas, console, database, e2e, replay, results

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
        results.record("replay_records_per_s", rates.replayed, "records/s replayed, one core", rates.read)
    if wanted("e2e") or wanted("e2e-profile"):
        print("e2e:")
        for point in e2e.run(profile=wanted("e2e-profile") and bool(selected)):
            n = point.workers
            results.record(f"e2e_{n}w_events_per_s", point.terminal_per_s, "events/s end to end", point.offered_per_s)
            results.record(
                f"e2e_{n}w_steps_per_s", point.steps_per_s, "worker steps/s; ceiling: no-op tasks/s", point.noop_per_s
            )
            claim_p99, submit_p99 = point.claim_late_ms[1], point.submit_late_ms[1]
            results.record(f"e2e_{n}w_fallback_claim_p99_ms", claim_p99, "ms fallback allowed -> claimed, p99", 1000)
            results.record(
                f"e2e_{n}w_fallback_submit_p99_ms", submit_p99, "ms fallback allowed -> submitted, p99", 1000
            )
            results.record(f"e2e_{n}w_worker_rss_mb", point.rss_mb, "MB worker RSS (all pool processes)", point.rss_mb)
    results.print_table()


if __name__ == "__main__":
    main(sys.argv[1:])
