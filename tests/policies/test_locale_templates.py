"""Template sets per locale: the lookup chain, their validation, and the segment limit at the longest."""

import pytest
from django.core.exceptions import ValidationError

from policies import locales, rendering, sms_check
from policies.datafiles import DEFAULTS_DIR, read
from policies.models import PolicyVersion
from policies.segments import UCS_2
from tests.factories import PolicyVersionFactory

GREEK = {
    "el": {
        "sms": "Επαναφορά κωδικού: {{ reset_url }} (λήγει {{ expires_time }} {{ expires_zone }})",
        "email_subject": "Επαναφορά κωδικού",
        "email_body": "Ανοίξτε τον σύνδεσμο: {{ reset_url }}",
    }
}


def a_set(sms: str = "{{ reset_url }}", subject: str = "Reset", body: str = "{{ reset_url }}") -> dict[str, str]:
    return {"sms": sms, "email_subject": subject, "email_body": body}


def shipped(name: str) -> PolicyVersion:
    content, _ = read(DEFAULTS_DIR / name)
    return PolicyVersion(**content, number=1)


def problems(policy: PolicyVersion) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as invalid:
        policy.full_clean(exclude=["number"])
    return invalid.value.message_dict


@pytest.mark.parametrize(
    ("locale", "rendered_in"),
    [
        ("de-AT", "de"),
        ("de", "de"),
        ("de-CH-1996", "de-CH"),
        ("zh-Hant-TW", "zh-Hant"),
        ("zh-Hans-CN", "zh"),
        ("fr-CA", ""),
        ("", ""),
    ],
)
def test_a_subscriber_gets_the_first_set_of_their_locales_lookup_chain(locale, rendered_in):
    policy = PolicyVersionFactory.build(
        locale_templates={key: a_set() for key in ("de", "de-CH", "zh", "zh-Hant")},
    )

    assert rendering.template_set_for(policy, locale).key == rendered_in


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("de-AT", "de-AT"),
        ("DE-at", "de-AT"),
        ("de_AT", "de-AT"),
        ("zh-hant-tw", "zh-Hant-TW"),
        ("es-419", "es-419"),
        ("de-US", "de-US"),  # no CLDR data for the pair: formatted as de
        ("iw-IL", "he-IL"),  # a deprecated code, as older Android sends it
        ("ja-JP-u-ca-japanese", "ja-JP"),  # an extension, as Java's toLanguageTag() writes it
        ("en-US-x-private", "en-US"),
        ("sl-rozaj-biske", "sl-biske-rozaj"),
        ("ca-ES-VALENCIA", "ca-ES-valencia"),
    ],
)
def test_a_locale_is_kept_as_rfc_5646_writes_it_without_what_lookup_ignores(given, canonical):
    assert locales.canonical(given) == canonical


@pytest.mark.parametrize(
    "nonsense",
    ["nonsense", "xx", "de.UTF-8", "x-private", "und", "de-ZZ", "de-XX", "", "-", "en-" + "A" * 25, "de-AT-\u0661"],
)
def test_a_tag_that_is_not_a_known_language_script_and_region_is_refused(nonsense):
    with pytest.raises(locales.InvalidLocale):
        locales.canonical(nonsense)


def test_formatting_is_cached_per_cldr_locale_not_per_callers_tag():
    from babel import Locale

    tags = []
    for region in sorted(Locale("en").territories):
        try:
            tags.append(locales.canonical(f"en-{region}"))
        except locales.InvalidLocale:
            continue  # a CLDR grouping that is no BCP 47 region (EU, UN, ZZ)
    before = locales._parsed.cache_info().currsize

    for tag in tags:
        assert locales.formatting_locale(tag).language == "en"

    used = {locales.data_identifier(tag) for tag in tags}
    assert len(tags) > 250 > len(used)
    assert locales._parsed.cache_info().currsize - before <= len(used)


def test_time_zones_are_the_iana_database_not_the_hosts():
    assert locales.valid_time_zone("Europe/Vienna")
    assert locales.valid_time_zone("UTC")
    assert not locales.valid_time_zone("Europe/Nowhere")
    assert not locales.valid_time_zone("localtime")  # whatever the host is set to
    assert not locales.valid_time_zone("Factory")


@pytest.mark.parametrize("name", ["us.toml", "eu.toml"])
def test_every_shipped_locale_renders_within_its_policys_segment_limit(db, name):
    policy = shipped(name)

    policy.full_clean(exclude=["number"])
    checks = sms_check.check(policy)

    assert all(check.within_limit for check in checks)
    # At its longest: each preview carries a link as long as the policy accepts.
    longest = sms_check.placeholder_link(policy.reset_url_max_length)
    assert len(longest) == policy.reset_url_max_length
    assert all(longest in check.preview for check in checks)


def test_the_shipped_policies_speak_the_languages_promised():
    assert {c.template_set.written_in for c in sms_check.check(shipped("us.toml"))} == {"en", "es"}
    assert {c.template_set.written_in for c in sms_check.check(shipped("eu.toml"))} == {
        "en",
        "de",
        "fr",
        "es",
        "it",
        "pl",
        "el",
    }


def test_a_greek_sms_is_ucs_2_and_is_refused_at_one_segment_naming_locale_encoding_characters_and_count(db):
    policy = PolicyVersionFactory.build(locale_templates=GREEK, sms_max_segments=1, reset_url_max_length=60)

    refused = problems(policy)["locale_templates"]

    assert len(refused) == 1
    assert refused[0].startswith("locale el: the SMS is UCS-2, forced by 'Ε' (U+0395)")  # noqa: RUF001
    assert "in 2 segments at its longest, over the limit of 1 (sms_max_segments)" in refused[0]


def test_the_same_greek_sms_is_accepted_at_two_segments(db):
    policy = PolicyVersionFactory.build(locale_templates=GREEK, sms_max_segments=2, reset_url_max_length=60)

    policy.full_clean(exclude=["number"])
    greek = next(check for check in sms_check.check(policy) if check.template_set.key == "el")

    assert (greek.encoded.encoding, greek.encoded.segments) == (UCS_2, 2)


def test_the_longest_link_decides_the_default_sms_too(db):
    policy = PolicyVersionFactory.build(
        sms_template="Reset: {{ reset_url }}", reset_url_max_length=200, sms_max_segments=1
    )

    assert problems(policy)["sms_template"] == [
        "locale en (default): the SMS is GSM-7, 207 characters in 2 segments at its longest, "
        "over the limit of 1 (sms_max_segments)"
    ]


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        ({"deutsch": a_set()}, "'deutsch': not a BCP 47 tag"),
        ({"und": a_set()}, "'und': unknown language subtag"),
        ({"de-at": a_set()}, "'de-at': write it de-AT"),
        ({"en": a_set()}, "en: is the default locale; edit the default templates instead"),
        ({"de": {"sms": "{{ reset_url }}"}}, "de: needs exactly sms, email_subject, email_body"),
        ({"de": a_set(sms="{% if %}{{ reset_url }}")}, "de sms: not a valid template"),
        ({"de": a_set(sms="Kein Link")}, "de sms: the SMS template must include {{ reset_url }}"),
        ({"de": a_set(subject="")}, "de email_subject: an email plan needs a subject"),
        ({"de": a_set(body="Kein Link")}, "de email_body: the email template must include {{ reset_url }}"),
    ],
)
def test_a_locale_set_that_cannot_be_used_is_refused_with_its_locale_named(db, sets, message):
    refused = problems(PolicyVersionFactory.build(locale_templates=sets))["locale_templates"]

    assert any(problem.startswith(message) for problem in refused), refused


def test_the_default_locale_must_be_a_canonical_tag(db):
    assert problems(PolicyVersionFactory.build(default_locale="EN"))["default_locale"] == ["write it en"]


def test_a_language_cldr_cannot_write_times_in_is_refused_for_a_set(db):
    # Klingon is a registered language; CLDR has no data for it, so no expiry could be written.
    assert problems(PolicyVersionFactory.build(default_locale="tlh"))["default_locale"] == [
        "CLDR has no data to write times in tlh"
    ]
    assert problems(PolicyVersionFactory.build(locale_templates={"tlh": a_set()}))["locale_templates"] == [
        "'tlh': CLDR has no data to write times in tlh"
    ]


def test_a_template_that_compiles_but_cannot_render_is_refused(db):
    refused = problems(PolicyVersionFactory.build(locale_templates={"de": a_set(body="{% url 'nowhere' %}")}))

    assert refused["locale_templates"] == [
        "de email_body: does not render: NoReverseMatch: Reverse for 'nowhere' not found. "
        "'nowhere' is not a valid view function or pattern name."
    ]


def test_a_version_saved_without_a_segment_limit_gets_1_where_every_sms_fits_else_2(db):
    fits = PolicyVersionFactory.create(sms_max_segments=None)
    greek = PolicyVersionFactory.create(region="EU", sms_max_segments=None, locale_templates=GREEK)

    assert (fits.sms_max_segments, greek.sms_max_segments) == (1, 2)
    fits.refresh_from_db()
    assert fits.sms_max_segments == 1


def test_the_segment_table_command_prints_every_set_and_fails_on_one_over_the_limit(tmp_path):
    from io import StringIO

    from django.core.management import CommandError, call_command

    shipped_table = StringIO()
    call_command("sms_segments", stdout=shipped_table)
    assert "| el | UCS-2 | 128 | 2 of 2 |" in shipped_table.getvalue()
    assert "| es | GSM-7 | 138 | 1 of 1 | — |" in shipped_table.getvalue()

    tight = tmp_path / "eu.toml"
    tight.write_text((DEFAULTS_DIR / "eu.toml").read_text().replace("sms_max_segments = 2", "sms_max_segments = 1"))
    with pytest.raises(CommandError, match=r"eu.toml: locale el: the SMS is UCS-2.*\n.*locale pl"):
        call_command("sms_segments", str(tight), stdout=StringIO())


@pytest.mark.parametrize(("name", "limit"), [("us.toml", 1), ("eu.toml", 2)])
def test_a_data_file_without_a_segment_limit_gets_1_where_every_sms_fits_one_else_2(db, tmp_path, name, limit):
    from policies.datafiles import load
    from tests.conftest import T0

    unset = tmp_path / name
    text = (DEFAULTS_DIR / name).read_text()
    unset.write_text("\n".join(line for line in text.splitlines() if not line.startswith("sms_max_segments")))

    content, _ = read(unset)
    loaded = load(unset, now=T0).version

    assert "sms_max_segments" not in content
    assert loaded.sms_max_segments == limit
    loaded.refresh_from_db()
    assert loaded.sms_max_segments == limit


def test_an_over_long_draft_is_refused_at_approval_with_the_reason(db):
    from django.contrib.auth.models import Permission, User

    from policies import lifecycle
    from policies.models import content_digest
    from tests.conftest import T0

    published = PolicyVersionFactory.create(sms_max_segments=1, reset_url_max_length=60)
    author = User.objects.create_user("ada")
    approver = User.objects.create_user("olu")
    approver.user_permissions.add(Permission.objects.get(codename="approve_policyversion"))
    draft = lifecycle.draft_from(published, author=author, reason="Greek", changes={"locale_templates": GREEK})

    with pytest.raises(ValidationError, match=r"locale el: the SMS is UCS-2.*2 segments.*over the limit of 1"):
        lifecycle.approve(draft, approver=approver, shown=content_digest(draft), now=T0)
    draft.refresh_from_db()
    assert draft.status == "draft"
