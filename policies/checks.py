"""What a channel plan needs from a policy version: senders, destinations, templates in every locale."""

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any, Protocol

import phonenumbers
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.template import Template, TemplateSyntaxError

from policies import locales, rendering, sms_check

# What a template is rendered with to prove it renders (any expiry does).
SAMPLE_EXPIRY = datetime(2026, 1, 15, 12, 10, tzinfo=UTC)


class ChannelSettings(Protocol):
    """What these checks read of a policy version (the model satisfies it; this module never imports it)."""

    sms_template: str
    email_subject_template: str
    email_body_template: str
    default_locale: str
    locale_templates: Any  # a JSON field: checked here to map locales to their three templates
    sms_max_segments: int | None
    reset_url_max_length: int
    allowed_sms_country_codes: Any  # a JSON field: checked here to be a list of calling codes
    sms_sender: str
    email_from: str

    @property
    def uses_sms(self) -> bool: ...
    @property
    def uses_email(self) -> bool: ...


def channel_errors(policy: ChannelSettings) -> dict[str, str]:
    problems: defaultdict[str, list[str]] = defaultdict(list)
    _locale_problems(policy, problems)
    if not problems:
        for template_set in rendering.template_sets(policy):
            _template_problems(policy, template_set, problems)
    if policy.uses_sms:
        codes = policy.allowed_sms_country_codes
        if not isinstance(codes, list) or not codes:
            problems["allowed_sms_country_codes"].append("an SMS plan needs at least one allowed country calling code")
        elif unknown := [
            c for c in codes if not isinstance(c, int) or phonenumbers.region_code_for_country_code(c) == "ZZ"
        ]:
            problems["allowed_sms_country_codes"].append(f"not country calling codes: {unknown}")
        if not policy.sms_sender:
            problems["sms_sender"].append("an SMS plan needs a sender number or messaging service")
        if not problems:
            # Only templates that render can be measured; the limit is the policy's promise of cost.
            for result in sms_check.check(policy):
                if not result.within_limit:
                    field = "sms_template" if result.template_set.key == rendering.DEFAULT else "locale_templates"
                    problems[field].append(result.problem)
    if policy.uses_email:
        try:
            validate_email(policy.email_from)
        except ValidationError:
            problems["email_from"].append("an email plan needs a valid from-address")
    return {field: "; ".join(messages) for field, messages in problems.items() if messages}


def _locale_problems(policy: ChannelSettings, problems: defaultdict[str, list[str]]) -> None:
    """The default locale and every set's key are canonical BCP 47 tags CLDR can format in; each
    set has its three texts."""
    if problem := _tag_problem(policy.default_locale):
        problems["default_locale"].append(problem)
    sets = policy.locale_templates
    if not isinstance(sets, dict):
        problems["locale_templates"].append("must map locales to their templates (sms, email_subject, email_body)")
        return
    for key, texts in sets.items():
        if problem := _tag_problem(key):
            problems["locale_templates"].append(f"{key!r}: {problem}")
        elif key == policy.default_locale:
            problems["locale_templates"].append(f"{key}: is the default locale; edit the default templates instead")
        elif not isinstance(texts, dict) or set(texts) != set(rendering.SET_FIELDS):
            fields = ", ".join(rendering.SET_FIELDS)
            problems["locale_templates"].append(f"{key}: needs exactly {fields}")
        elif not all(isinstance(text, str) for text in texts.values()):
            problems["locale_templates"].append(f"{key}: each template is text")


def _tag_problem(tag: str) -> str | None:
    """Why ``tag`` cannot name a template set's language, if it cannot."""
    try:
        canonical = locales.canonical(tag)
    except locales.InvalidLocale as error:
        return str(error)
    if canonical != tag:
        return f"write it {canonical}"
    if locales.data_identifier(tag) is None:
        # The expiry is written in the set's language: CLDR must be able to write it.
        return f"CLDR has no data to write times in {tag}"
    return None


def _template_problems(
    policy: ChannelSettings, template_set: rendering.TemplateSet, problems: defaultdict[str, list[str]]
) -> None:
    """Each template compiles and renders; the texts the plan sends carry the link, and an email has a subject."""

    def report(name: str, problem: str) -> None:
        if template_set.key == rendering.DEFAULT:
            problems[f"{name}_template"].append(problem)
        else:
            problems["locale_templates"].append(f"{template_set.key} {name}: {problem}")

    broken = set()
    for name, text in template_set.texts.items():
        try:
            Template(text)
        except TemplateSyntaxError as error:
            report(name, f"not a valid template: {error}")
            broken.add(name)
            continue
        try:
            rendering.render(text, sms_check.placeholder_link(40), SAMPLE_EXPIRY, "13:10", "GMT+01:00")
        except Exception as error:  # a template's own tags can raise anything (a {% url %} to nowhere)
            report(name, f"does not render: {type(error).__name__}: {error}")
            broken.add(name)
    if policy.uses_sms and "sms" not in broken and "reset_url" not in template_set.sms:
        report("sms", "the SMS template must include {{ reset_url }}")
    if policy.uses_email and "email_subject" not in broken and not template_set.email_subject:
        report("email_subject", "an email plan needs a subject")
    if policy.uses_email and "email_body" not in broken and "reset_url" not in template_set.email_body:
        report("email_body", "the email template must include {{ reset_url }}")
