"""Logins: failures counted per address and per account, then 429 until the oldest leaves its window."""

import io
import re
import threading
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.contrib.auth.signals import user_login_failed
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from limits.errors import StorageError

from config.env import Rate
from plumbing import ratelimit
from plumbing.ratelimit import limiter_for
from runbook.console.logins import BY_ACCOUNT, BY_CLIENT, account_key
from tests.concurrency import race
from tests.conftest import T0
from tests.counts import COUNTS_REDIS, in_redis

CONSOLE = "/accounts/login/"
ADMIN = "/admin/login/"
PASSWORD = "correct horse battery staple"  # the runbook fixtures' users'


@pytest.fixture(autouse=True)
def small_limits(settings):
    settings.LOGIN_FAILURES_PER_CLIENT = Rate(3, 900)
    settings.LOGIN_FAILURES_PER_ACCOUNT = Rate(5, 900)


@pytest.fixture(autouse=True)
def stopped_clock(counts_on_the_wall_clock):
    # Every attempt of a test at one instant: a window then ends its whole period after them.
    with time_machine.travel(T0 + timedelta(minutes=1), tick=False) as traveller:
        yield traveller


def log_in(username, password, address, url=CONSOLE):
    """One attempt from a fresh browser at ``address``."""
    return Client().post(url, {"username": username, "password": password}, REMOTE_ADDR=address)


def error_shown(response) -> str:
    return " ".join(re.findall(r'<p class="error(?:note)?">([^<]*)</p>', response.content.decode()))


def test_a_client_over_its_limit_is_told_to_wait_even_with_the_right_password(responder):
    for guess in ("ghost", "olga", "rita"):
        assert log_in(guess, "wrong", "10.0.0.1").status_code == 200

    refused = log_in("rita", PASSWORD, "10.0.0.1")

    assert refused.status_code == 429
    assert error_shown(refused) == "Too many failed log-in attempts. Wait 15 minutes and try again."
    assert "_auth_user_id" not in refused.wsgi_request.session


def test_failures_under_the_limit_do_not_stop_the_right_password(responder):
    log_in("rita", "wrong", "10.0.0.1")
    log_in("rita", "wrong", "10.0.0.1")

    assert log_in("rita", PASSWORD, "10.0.0.1").status_code == 302


def test_other_clients_failures_on_other_accounts_do_not_block_a_login(responder, viewer):
    for _ in range(10):
        log_in("victor", "wrong", "10.0.0.1")
        log_in("nobody", "wrong", "10.0.0.3")

    assert log_in("rita", PASSWORD, "10.0.0.2").status_code == 302


def test_an_account_guessed_from_many_addresses_is_throttled_from_everywhere(responder, viewer):
    for n in range(5):
        log_in("rita", "wrong", f"10.0.1.{n}")

    assert log_in("rita", PASSWORD, "10.0.2.1").status_code == 429
    # The same fresh address may still log in to an account nobody guessed at.
    assert log_in("victor", PASSWORD, "10.0.2.1").status_code == 302


def test_spellings_of_one_name_count_as_one_account(responder):
    full_width = "\uff52\uff49\uff54\uff41"
    for n, spelling in enumerate(["RITA", " rita", "Rita", "rita ", full_width]):
        log_in(spelling, "wrong", f"10.0.1.{n}")

    assert log_in("rita", PASSWORD, "10.0.2.1").status_code == 429


def test_the_answer_does_not_tell_whether_the_account_exists(responder):
    for n in range(5):
        log_in("rita", "wrong", f"10.0.1.{n}")
        log_in("nobody-by-this-name", "wrong", f"10.0.3.{n}")

    real = log_in("rita", "wrong", "10.0.2.1")
    unknown = log_in("nobody-by-this-name", "wrong", "10.0.2.2")

    assert (real.status_code, error_shown(real)) == (unknown.status_code, error_shown(unknown))
    assert real.status_code == 429


def test_a_throttled_attempt_checks_no_password(responder):
    for _ in range(3):
        log_in("rita", "wrong", "10.0.0.1")
    checked: list[object] = []
    user_login_failed.connect(checked.append, dispatch_uid="count-checks")
    try:
        log_in("rita", "still wrong", "10.0.0.1")
    finally:
        user_login_failed.disconnect(dispatch_uid="count-checks")

    assert checked == []


def test_the_throttle_lifts_when_the_window_ends(responder, stopped_clock):
    for _ in range(3):
        log_in("rita", "wrong", "10.0.0.1")
    assert log_in("rita", PASSWORD, "10.0.0.1").status_code == 429

    stopped_clock.shift(timedelta(minutes=15))

    assert log_in("rita", PASSWORD, "10.0.0.1").status_code == 302


def test_the_admin_login_is_throttled_too(db):
    User.objects.create_superuser("admin", "admin@example.org", PASSWORD)
    for _ in range(3):
        assert log_in("admin", "wrong", "10.0.0.1", url=ADMIN).status_code == 200

    refused = log_in("admin", PASSWORD, "10.0.0.1", url=ADMIN)

    assert refused.status_code == 429
    assert "Too many failed log-in attempts" in error_shown(refused)
    assert log_in("admin", PASSWORD, "10.0.0.2", url=ADMIN).status_code == 302


def test_admin_and_console_failures_count_together(responder):
    for _ in range(3):
        log_in("rita", "wrong", "10.0.0.1", url=ADMIN)

    assert log_in("rita", PASSWORD, "10.0.0.1").status_code == 429


def test_the_log_names_neither_the_address_nor_the_account(responder, caplog):
    for _ in range(4):
        log_in("rita", "wrong", "10.0.0.1")

    assert "login_throttled" in caplog.text
    assert "10.0.0.1" not in caplog.text
    assert "rita" not in caplog.text


def test_an_operator_can_lift_an_account_throttle_before_the_window_ends(responder):
    for n in range(5):
        log_in("rita", "wrong", f"10.0.1.{n}")
    assert log_in("rita", PASSWORD, "10.0.2.1").status_code == 429

    call_command("unthrottle_login", "--account", "Rita", stdout=io.StringIO(), stderr=io.StringIO())

    assert log_in("rita", PASSWORD, "10.0.2.1").status_code == 302


def test_lifting_needs_an_account_or_an_address(db):
    with pytest.raises(CommandError, match="--account, --address"):
        call_command("unthrottle_login")


@pytest.fixture(params=["refuses", "hangs"])
def failing_store(request) -> str:
    """A counts store that is down (nothing listens) or stuck (accepts, never answers)."""
    if request.param == "refuses":
        return "redis://127.0.0.1:9/0"
    return str(request.getfixturevalue("silent_server").url)


def test_with_the_counts_store_down_or_stuck_a_login_fails_closed(responder, monkeypatch, caplog, failing_store):
    # The API goes on uncounted when its Redis is down (tests/api/test_rate_limit_store_down.py);
    # a login does not: the throttle guards people's passwords, and a guesser could wait for this.
    # A stuck Redis is given REDIS_CACHE_TIMEOUT, then refused the same way, not waited on.
    monkeypatch.setattr(ratelimit, "limiter_for", limiter_for)  # the project's own, not the wall clock's window
    with override_settings(RATE_LIMIT_STORAGE=failing_store):
        answer = Client(raise_request_exception=False).post(
            CONSOLE, {"username": "rita", "password": PASSWORD}, REMOTE_ADDR="10.0.0.1"
        )

    assert answer.status_code == 500
    # Refused by the store's failure, not by anything else a login could raise.
    assert any(record.exc_info and record.exc_info[0] is StorageError for record in caplog.records)
    assert "_auth_user_id" not in answer.wsgi_request.session


def test_successful_logins_leave_the_address_its_whole_limit(responder):
    for _ in range(5):
        assert log_in("rita", PASSWORD, "10.0.0.1").status_code == 302

    for _ in range(2):
        log_in("rita", "wrong", "10.0.0.1")

    assert log_in("rita", PASSWORD, "10.0.0.1").status_code == 302


class PasswordChecks:
    """The password checks of ``attempts`` concurrent logins, each held until every attempt has
    either reached its check or been answered without one: the widest the race can open."""

    def __init__(self, attempts: int) -> None:
        self.attempts = attempts
        self.checked = 0
        self._unchecked = 0
        self._changed = threading.Condition()
        self._in_check = threading.local()

    def hold(self) -> None:
        self._in_check.reached = True
        with self._changed:
            self.checked += 1
            self._changed.notify_all()
            # The timeout only keeps a broken test from hanging the suite; nothing is asserted on it.
            self._changed.wait_for(lambda: self.checked + self._unchecked == self.attempts, timeout=120)

    def answered(self) -> None:
        """One attempt is answered: counted here if its password was never checked."""
        if not getattr(self._in_check, "reached", False):
            with self._changed:
                self._unchecked += 1
                self._changed.notify_all()


class HeldModelBackend(ModelBackend):
    """Django's own password check (as AUTHENTICATION_BACKENDS), counted and held by ``checks``."""

    checks: PasswordChecks  # on the class: Django makes a backend afresh for every login

    def authenticate(self, request, username=None, password=None, **kwargs):
        self.checks.hold()
        return super().authenticate(request, username, password, **kwargs)


@pytest.fixture
def held_checks(settings, monkeypatch) -> PasswordChecks:
    checks = PasswordChecks(attempts=40)
    monkeypatch.setattr(HeldModelBackend, "checks", checks, raising=False)
    settings.AUTHENTICATION_BACKENDS = [f"{__name__}.HeldModelBackend"]
    return checks


@pytest.fixture(params=["memory", pytest.param("redis", marks=in_redis)])
def counts(request, monkeypatch, settings) -> None:
    """Where the attempts are counted: this process's memory (the autouse wall-clock window) or Redis."""
    if request.param == "redis":
        monkeypatch.setattr(ratelimit, "limiter_for", limiter_for)
        settings.RATE_LIMIT_STORAGE = COUNTS_REDIS


@pytest.mark.parametrize(
    ("addresses", "limit"),
    [(1, 3), (40, 5)],  # the client's limit from one address, the account's from forty
    ids=["one-address", "many-addresses"],
)
def test_concurrent_wrong_passwords_reach_the_password_check_no_more_than_the_limit(
    transactional_db, responder, counts, held_checks, addresses, limit
):
    sources = [f"10.0.3.{n % addresses}" for n in range(held_checks.attempts)]
    for address in set(sources):  # Redis keeps counts from earlier runs
        BY_CLIENT.clear(address)
    BY_ACCOUNT.clear(account_key("rita"))

    def attempt(n):
        try:
            return log_in("rita", "wrong", sources[n]).status_code
        finally:
            held_checks.answered()

    answers = race(attempt, count=held_checks.attempts)

    assert held_checks.checked == limit
    assert sorted(answers) == [200] * limit + [429] * (held_checks.attempts - limit)
