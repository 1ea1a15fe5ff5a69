from django.db import models


class Tally(models.Model):
    """A running total that any process adds to, read by the web process for ``/metrics``.

    Workers run in other processes (and on other hosts) than the web server, so what
    they did is counted here, in the database, rather than in one process's memory.
    ``label`` is a channel, or a histogram bucket's upper bound (``le``), ``sum`` or ``count``;
    where a metric has a second label, both, joined by ``tallies.LABEL_SEPARATOR`` ("email/de").
    """

    name = models.CharField(max_length=64)
    region = models.CharField(max_length=8, blank=True)
    label = models.CharField(max_length=64, blank=True)
    value = models.FloatField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name", "region", "label"], name="tally_unique")]

    def __str__(self) -> str:
        return f"{self.name}{{{self.region},{self.label}}}={self.value:g}"


class TallyWatermark(models.Model):
    """How far the roll-up has read an append-only table (its last id), so no row counts twice."""

    source = models.CharField(max_length=32, primary_key=True)
    last_id = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.source}@{self.last_id}"
