"""An admin in a real browser adds a Greek template set to a draft: the page shows each locale's SMS at its
longest (encoding, characters, segments, a preview with a placeholder link); over the limit, the save is
refused naming the locale, and at a limit that allows it the draft is kept."""

import pytest
from django.contrib.auth.models import Permission, User
from playwright.sync_api import expect

from policies.models import PolicyVersion, Stage
from tests.browser.conftest import PASSWORD
from tests.factories import PolicyVersionFactory

pytestmark = pytest.mark.django_db(transaction=True)

GREEK = '''[el]
sms = "Επαναφορά κωδικού: {{ reset_url }} (λήγει {{ expires_time }} {{ expires_zone }})"
email_subject = "Επαναφορά κωδικού"
email_body = """
Ανοίξτε τον σύνδεσμο πριν από τις {{ expires_time }} ({{ expires_zone }}):
{{ reset_url }}
"""
'''


@pytest.fixture
def draft(db) -> PolicyVersion:
    return PolicyVersionFactory.create(
        status=Stage.DRAFT,
        published_at=None,
        sms_template="Reset: {{ reset_url }} (until {{ expires_time }} {{ expires_zone }})",
        sms_max_segments=1,
        reset_url_max_length=60,
    )


def _log_in_as_author(page, live_server) -> None:
    user = User.objects.create_user("ada", password=PASSWORD, is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=("view_policyversion", "add_policyversion", "change_policyversion"))
    )
    page.goto(f"{live_server.url}/admin/login/?next=/admin/policies/policyversion/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")


def test_the_draft_page_previews_each_locales_sms_and_a_greek_set_over_the_limit_is_refused(page, live_server, draft):
    _log_in_as_author(page, live_server)
    change = f"{live_server.url}/admin/policies/policyversion/{draft.pk}/change/"
    page.goto(change)
    preview = page.locator("table.sms-by-locale")
    default = preview.locator("tbody tr", has_text="en (default)")
    expect(default).to_contain_text("GSM-7")
    expect(default).to_contain_text("1 of 1")
    expect(default.locator(".sms-preview")).to_contain_text("Reset: https://reset.example/xxxx")

    page.fill("#id_locale_templates", GREEK)
    page.get_by_role("button", name="Save and continue editing").click()

    expect(page.locator(".errornote").first).to_be_visible()
    expect(page.locator(".field-locale_templates .errorlist")).to_contain_text(
        "locale el: the SMS is UCS-2, forced by '\u0395' (U+0395)"
    )
    expect(page.locator(".field-locale_templates .errorlist")).to_contain_text("over the limit of 1")
    draft.refresh_from_db()
    assert draft.locale_templates == {}

    page.fill("#id_sms_max_segments", "2")
    page.get_by_role("button", name="Save and continue editing").click()

    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    draft.refresh_from_db()
    assert set(draft.locale_templates) == {"el"}
    greek = page.locator("table.sms-by-locale tbody tr", has_text="el")
    expect(greek).to_contain_text("UCS-2")
    expect(greek).to_contain_text("2 of 2")
    expect(greek.locator(".sms-preview")).to_contain_text("Επαναφορά κωδικού: https://reset.example/")
    # The set reads back as the TOML it was written in.
    expect(page.locator("#id_locale_templates")).to_have_value(
        '[el]\nsms = "Επαναφορά κωδικού: {{ reset_url }} (λήγει {{ expires_time }} {{ expires_zone }})"\n'
        'email_subject = "Επαναφορά κωδικού"\nemail_body = """\n'
        'Ανοίξτε τον σύνδεσμο πριν από τις {{ expires_time }} ({{ expires_zone }}):\n{{ reset_url }}\n"""\n'
    )
