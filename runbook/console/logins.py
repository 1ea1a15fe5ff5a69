"""Console and admin logins, throttled per client address and per account.

Every attempt is counted against the client's address (``LOGIN_FAILURES_PER_CLIENT``) and
against the account name it tried (``LOGIN_FAILURES_PER_ACCOUNT``, normalised, counted whether
or not such an account exists) *before* its password is checked, and a success takes its counts
back: what the limits count is failures, and attempts still being checked. Once either is
spent, the form answers 429 with "wait and try again" until its oldest count leaves the window
(a moving window, ``plumbing.ratelimit``), without checking the password, right or wrong: so the
answer never tells whether the account exists or the password was right, a throttled guess
costs no password hash, and however many guesses arrive at once, no more than the limit reach
the check. A client under its limit logging in to an account under its limit is never refused,
whatever other clients do to other accounts (only its own attempts in flight count against it).
"""

import logging
import math
import unicodedata
from typing import Any, NoReturn

from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.debug import sensitive_variables

from plumbing.ratelimit import FailureCount, client_address

log = logging.getLogger("runbook.logins")

BY_CLIENT = FailureCount("login-client", "LOGIN_FAILURES_PER_CLIENT")
BY_ACCOUNT = FailureCount("login-account", "LOGIN_FAILURES_PER_ACCOUNT")


def account_key(username: str) -> str:
    """The name failures are counted under: "Rita", " rita" and its full-width form are one account to guess."""
    return unicodedata.normalize("NFKC", username).strip().casefold()


class LoginForm(AuthenticationForm):
    throttled = False

    @sensitive_variables()
    def clean(self) -> dict[str, Any]:
        """Check the password of an attempt both counts have room for, counted before the check.

        1. Count the attempt against the client's address, then against the account, each in
           one atomic step (``FailureCount.take``): asked about first and counted after the
           check, any number of attempts arriving together would all find the same room.
        2. Refuse (429, no password checked) an attempt either count has no room for; it counts
           against neither.
        3. Check the password. A failure stays counted; a success takes both counts back.
        """
        address = client_address(self.request) if self.request is not None else ""
        account = account_key(self.cleaned_data.get("username") or "")
        if not BY_CLIENT.take(address):
            self._refuse("client", BY_CLIENT.retry_after(address))
        if not BY_ACCOUNT.take(account):
            BY_CLIENT.give_back(address)
            self._refuse("account", BY_ACCOUNT.retry_after(account))
        cleaned = super().clean()  # a wrong password raises, and leaves both counted
        BY_CLIENT.give_back(address)
        BY_ACCOUNT.give_back(account)
        return cleaned

    def _refuse(self, by: str, wait: int | None) -> NoReturn:
        self.throttled = True
        # Which limit it was goes to the log only: telling the client would say the account exists.
        log.warning("login_throttled", extra={"by": by})
        # No wait (None) when attempts in flight have given their counts back since: a minute, then.
        minutes = max(1, math.ceil((wait or 0) / 60))
        raise ValidationError(
            f"Too many failed log-in attempts. Wait {minutes} minute{'s' if minutes > 1 else ''} and try again.",
            code="throttled",
        )


class AdminLoginForm(LoginForm, AdminAuthenticationForm):
    """The admin's form (staff accounts only) with the same throttle."""


def with_throttle_status(response: HttpResponse) -> HttpResponse:
    """Answer 429 when the login form on this page was refused by the throttle."""
    form = (getattr(response, "context_data", None) or {}).get("form")
    if isinstance(form, LoginForm) and form.throttled:
        response.status_code = 429
    return response


class LoginView(auth_views.LoginView):
    authentication_form = LoginForm

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return with_throttle_status(super().post(request, *args, **kwargs))


class AdminSite(admin.AdminSite):
    """Django's admin site, whose login is throttled like the console's (``config.apps.AdminConfig``)."""

    login_form = AdminLoginForm

    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        return with_throttle_status(super().login(request, extra_context))
