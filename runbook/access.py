"""Who may use the console: anonymous users go to the login page, others need a permission."""

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

View = Callable[..., HttpResponse]


class ConsoleRequest(HttpRequest):
    """A request that passed ``requires``: a logged-in user, and htmx's details."""

    user: User
    htmx: HtmxDetails


def requires(permission: str) -> Callable[[View], View]:
    """Let only users holding ``permission`` through; send anonymous users to log in.

    An htmx refresh whose session expired gets a client-side redirect to the login
    page, instead of the login form swapped into the middle of the console.
    """

    def decorator(view: View) -> View:
        @wraps(view)
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                htmx = getattr(request, "htmx", None)
                back_to = (htmx.current_url_abs_path if htmx else None) or request.get_full_path()
                login = redirect_to_login(back_to)
                return HttpResponseClientRedirect(login["Location"]) if htmx else login
            if not request.user.has_perm(permission):
                raise PermissionDenied(f"needs the {permission} permission")
            return view(request, *args, **kwargs)

        return guarded

    return decorator
