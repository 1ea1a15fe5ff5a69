from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class PoliciesConfig(AppConfig):
    name = "policies"
    verbose_name = "Regional delivery policies"

    def ready(self) -> None:
        from policies import cache
        from policies.models import PolicyVersion

        post_save.connect(cache.clear, sender=PolicyVersion, dispatch_uid="policy-cache-save")
        post_delete.connect(cache.clear, sender=PolicyVersion, dispatch_uid="policy-cache-delete")
