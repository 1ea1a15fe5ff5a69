from django.contrib.admin.apps import AdminConfig as DjangoAdminConfig


class AdminConfig(DjangoAdminConfig):
    """Django's admin, on a site whose login is throttled (Django's documented way to swap the site)."""

    default_site = "runbook.console.logins.AdminSite"
