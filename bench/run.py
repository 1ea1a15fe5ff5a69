"""`make bench`: every figure with its ceiling, measured side by side in one run."""

import os

import django


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from bench import cas, database, results

    database.prepare()
    project, raw = cas.run()
    results.record("cas_transitions_per_s", project, "transitions/s (8 workers)", raw)
    results.print_table()


if __name__ == "__main__":
    main()
