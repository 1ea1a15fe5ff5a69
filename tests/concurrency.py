"""Real concurrency for tests on PostgreSQL: threads with their own database connections."""

import sys
import threading

from django.db import connections

THREADS = 8


def race(target, count=THREADS):
    """Run ``target(i)`` in ``count`` threads released together; return their results in order."""
    barrier = threading.Barrier(count)
    results = [None] * count
    errors = []

    def run(i):
        try:
            barrier.wait()
            results[i] = target(i)
        except Exception as error:  # surfaced below, with the thread's traceback
            errors.append(error)
        finally:
            connections.close_all()

    run_all([threading.Thread(target=run, args=(i,)) for i in range(count)])
    if errors:
        raise errors[0]
    return results


def run_all(threads: list[threading.Thread]) -> None:
    """Start ``threads`` and wait for them all."""
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def run_interleaved(threads: list[threading.Thread]) -> None:
    """Run ``threads`` switching among them every microsecond, so a race shows in a second's run.

    Python switches threads every 5 ms by default; a loaded server's I/O makes them switch far
    more often, inside the few lines where two requests can meet.
    """
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        run_all(threads)
    finally:
        sys.setswitchinterval(interval)
