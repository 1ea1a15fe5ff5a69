"""What a channel plan needs from a policy version: senders, destinations, templates."""

from typing import Any, Protocol

import phonenumbers
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.template import Template, TemplateSyntaxError

TEMPLATE_FIELDS = ("sms_template", "email_subject_template", "email_body_template")


class ChannelSettings(Protocol):
    """What these checks read of a policy version (the model satisfies it; this module never imports it)."""

    sms_template: str
    email_subject_template: str
    email_body_template: str
    allowed_sms_country_codes: Any  # a JSON field: checked here to be a list of calling codes
    sms_sender: str
    email_from: str

    @property
    def uses_sms(self) -> bool: ...
    @property
    def uses_email(self) -> bool: ...


def channel_errors(policy: ChannelSettings) -> dict[str, str]:
    errors: dict[str, str] = {}
    for name in TEMPLATE_FIELDS:
        try:
            Template(getattr(policy, name))
        except TemplateSyntaxError as error:
            errors[name] = f"{name} is not a valid template: {error}"
    if policy.uses_sms:
        codes = policy.allowed_sms_country_codes
        if not isinstance(codes, list) or not codes:
            errors["allowed_sms_country_codes"] = "an SMS plan needs at least one allowed country calling code"
        elif unknown := [
            c for c in codes if not isinstance(c, int) or phonenumbers.region_code_for_country_code(c) == "ZZ"
        ]:
            errors["allowed_sms_country_codes"] = f"not country calling codes: {unknown}"
        if not policy.sms_sender:
            errors["sms_sender"] = "an SMS plan needs a sender number or messaging service"
        if "reset_url" not in policy.sms_template and "sms_template" not in errors:
            errors["sms_template"] = "the SMS template must include {{ reset_url }}"
    if policy.uses_email:
        try:
            validate_email(policy.email_from)
        except ValidationError:
            errors["email_from"] = "an email plan needs a valid from-address"
        if not policy.email_subject_template and "email_subject_template" not in errors:
            errors["email_subject_template"] = "an email plan needs a subject"
        if "reset_url" not in policy.email_body_template and "email_body_template" not in errors:
            errors["email_body_template"] = "the email template must include {{ reset_url }}"
    return errors
