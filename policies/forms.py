"""The policy admin's form: locale template sets edited as TOML, the syntax of the reviewed data files."""

import tomllib
from typing import TYPE_CHECKING, Any

import tomli_w
from django import forms
from django.core.exceptions import ValidationError

from policies.models import PolicyVersion
from policies.rendering import SET_FIELDS


class LocaleTemplatesField(forms.Field):
    """``{locale: {sms, email_subject, email_body}}`` shown and read as TOML tables.

    A table per locale (``[de]``) with multi-line strings for the email body: what a
    translator can read and edit, unlike JSON's escaped newlines.
    """

    widget = forms.Textarea(attrs={"rows": 24, "cols": 100, "spellcheck": "false", "class": "vLargeTextField"})

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, dict):
            # In a fixed order (PostgreSQL's jsonb keeps none): locales sorted, each set's texts as
            # the message reads, SMS first.
            return tomli_w.dumps({key: _in_order(value[key]) for key in sorted(value)}, multiline_strings=True)
        return str(value or "")

    def to_python(self, value: Any) -> dict[str, Any]:
        text = str(value or "")
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ValidationError(f"not valid TOML: {error}") from None


if TYPE_CHECKING:
    _ModelForm = forms.ModelForm[PolicyVersion]
else:
    _ModelForm = forms.ModelForm  # generic only for the type checker


class PolicyVersionForm(_ModelForm):
    locale_templates = LocaleTemplatesField(
        required=False,
        help_text="A table per locale (BCP 47): [de] with sms, email_subject and email_body. A subscriber gets "
        "the first set of their locale's lookup chain (de-AT, then de), else the default templates above. "
        "Context: reset_url, expires_time and expires_zone (the expiry in their zone and language).",
    )
    # No Meta: the admin builds one with every field (ModelAdmin.get_form); this form only says
    # how locale_templates is edited.


class ApprovalForm(forms.Form):
    """Approve a draft as its approval page showed it: the page's content digest comes back with the form."""

    # Rendered by the page from the same version it shows (the template writes it), never
    # from the request: a refused approval shows the draft as it is now, with that digest.
    shown = forms.CharField(max_length=64, widget=forms.HiddenInput)


def _in_order(texts: Any) -> Any:
    if not isinstance(texts, dict):
        return texts
    ordered = [name for name in SET_FIELDS if name in texts]
    return {name: texts[name] for name in [*ordered, *sorted(set(texts) - set(ordered))]}
