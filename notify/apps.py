from django.apps import AppConfig
from django.core import checks

from notify.checks import check_exclusive_senders


class NotifyConfig(AppConfig):
    name = "notify"
    verbose_name = "Reset delivery"

    def ready(self) -> None:
        checks.register(check_exclusive_senders)
