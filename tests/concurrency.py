"""Real concurrency for tests on PostgreSQL: threads with their own database connections."""

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

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results
