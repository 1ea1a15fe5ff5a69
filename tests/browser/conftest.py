"""A real headless Chromium (Debian's package) driven by Playwright against the live server."""

import shutil

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
PASSWORD = "correct horse battery staple"
# Without the background-networking flags Chromium keeps dialling Google, which this
# machine's closed network refuses; the rest keep a root-run, GPU-less browser quiet.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def responder(db):
    """A console user in the responders group, who logs in as ``rita``."""
    user = User.objects.create_user("rita", password=PASSWORD)
    user.groups.add(Group.objects.get(name="responders"))
    return user


@pytest.fixture(scope="session")
def browser():
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package (.ci/run does)")
    # Playwright's sync API keeps an event loop in this thread while the browser is open;
    # Django then refuses ORM calls here (test database set-up, the test's own events and
    # worker steps), though they are plain synchronous code. Allowed for exactly that long.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            yield browser
            browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.problems = problems
    yield page
    context.close()
