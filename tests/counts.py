"""What the rate-limit and failure-count tests share: the suite's Redis for counts, and a host clock set apart."""

from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest
import time_machine
from django.conf import settings

# The suite's own Redis (the broker's server: make test starts one on a port of its own), in the
# database the tests keep for counts.
COUNTS_REDIS = urlsplit(settings.CELERY_BROKER_URL)._replace(path="/13").geturl()
in_redis = pytest.mark.skipif(not COUNTS_REDIS.startswith("redis://"), reason="counts shared in Redis")


def host_clock(offset: timedelta) -> time_machine.travel:
    """This host's wall clock ``offset`` from the true time, running on: time.time() and
    datetime.now() of this process only, where Redis keeps its own time."""
    return time_machine.travel(datetime.now(UTC) + offset, tick=True)
