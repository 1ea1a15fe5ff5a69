"""The console's forms. A note is free text, so it is checked for personal data before it is kept."""

import re

import phonenumbers
from django import forms

# Anything shaped like an address or a link; a reset link is a URL, and an email is personal data.
_EMAIL = re.compile(r"[^\s@]+@[^\s@]+\.[^\s@]+")
_URL = re.compile(r"(https?://|www\.)\S+", re.IGNORECASE)


def _has_phone_number(text: str) -> bool:
    # Lenient on purpose: any number the library finds plausible, in any region's format.
    return any(True for _ in phonenumbers.PhoneNumberMatcher(text, "US", leniency=phonenumbers.Leniency.POSSIBLE))


class NoteForm(forms.Form):
    note = forms.CharField(
        max_length=500,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "What needs following up, and by whom"}),
        help_text="No phone numbers, email addresses or links: the console never shows personal data. "
        "Seven or more digits in a row read as a phone number and are refused too.",
    )

    def clean_note(self) -> str:
        note: str = self.cleaned_data["note"].strip()
        if _EMAIL.search(note) or _URL.search(note) or _has_phone_number(note):
            raise forms.ValidationError(
                "Notes must not contain a phone number, an email address or a link. Refer to the event by its id."
            )
        return note


class SeenVersionForm(forms.Form):
    """What the responder saw when they decided: the action is refused if the event moved since."""

    version = forms.IntegerField(min_value=1)


class SeenLeaseForm(forms.Form):
    """The fencing token of the expired lease the responder saw."""

    lease_token = forms.IntegerField(min_value=0)
