from django.db import models


class VaultEntry(models.Model):
    """Encrypted destinations and reset link of one event; read only by transport adapters."""

    event = models.OneToOneField("notify.Event", on_delete=models.CASCADE, primary_key=True, related_name="vault")
    ciphertext = models.BinaryField()
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"vault for {self.event_id}"
