"""`make bench`: every figure with its ceiling, measured side by side in one run."""

import os

import django


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from bench import api, cas, database, results

    database.prepare()
    project, raw = cas.run()
    results.record("cas_transitions_per_s", project, "transitions/s (8 workers)", raw)
    served = api.run()
    results.record("api_creations_per_s", served.create.rate, "events/s created over HTTP", served.ceiling.rate)
    results.record("api_create_p50_ms", served.create.p50_ms, "ms per creation, median", served.ceiling.p50_ms)
    results.record("api_create_p99_ms", served.create.p99_ms, "ms per creation, p99", served.ceiling.p99_ms)
    results.print_table()


if __name__ == "__main__":
    main()
