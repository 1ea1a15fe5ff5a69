from django.db import models


class HostClock(models.Model):
    """The largest offset of a host's clock from the database's in its last reporting window.

    Deadlines are judged on the database's clock, so an offset no longer decides anything;
    it is still the sign of a broken time service, shown in ``/metrics`` and alerted on.
    """

    host = models.CharField(max_length=128, primary_key=True)
    # The host's wall clock minus the database's: positive when the host runs ahead.
    offset_seconds = models.FloatField()
    # On the database's clock, like every deadline: /metrics shows only recent windows.
    measured_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.host}: {self.offset_seconds:+.3f}s"
