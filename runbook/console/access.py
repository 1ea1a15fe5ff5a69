"""Who may use the console: anonymous users go to the login page, others need a permission."""

from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.utils.http import url_has_allowed_host_and_scheme
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
                login = redirect_to_login(_back_to(request))
                return HttpResponseClientRedirect(login["Location"]) if _htmx(request) else login
            if not request.user.has_perm(permission):
                raise PermissionDenied(f"needs the {permission} permission")
            return view(request, *args, **kwargs)

        return guarded

    return decorator


def _back_to(request: HttpRequest) -> str:
    """Where to return after logging in: the page the user was on, never an action's URL.

    An htmx refresh names its page in HX-Current-URL; a form posted after the session
    expired came from the page in its Referer (a GET of the action's URL would be a 405).
    """
    htmx = _htmx(request)
    if htmx:
        return htmx.current_url_abs_path or "/"
    if request.method in ("GET", "HEAD"):
        return request.get_full_path()
    referer = request.headers.get("Referer", "")
    if url_has_allowed_host_and_scheme(referer, allowed_hosts={request.get_host()}):
        return urlsplit(referer).path
    return "/"


def _htmx(request: HttpRequest) -> HtmxDetails | None:
    details: HtmxDetails | None = getattr(request, "htmx", None)
    return details if details else None
