from django.apps import AppConfig


class RunbookConfig(AppConfig):
    name = "runbook"
    verbose_name = "On-call console"
