"""Fictional subscribers for the demo feed and the benchmarks: valid numbers, nobody's phone."""

import random

import phonenumbers


def fictional_phone(rng: random.Random, country: str) -> str:
    """Return a valid number for ``country``: its example mobile number with the last digits varied."""
    example = phonenumbers.example_number_for_type(country, phonenumbers.PhoneNumberType.MOBILE)
    assert example is not None
    digits = str(example.national_number)
    while True:
        candidate = phonenumbers.PhoneNumber(
            country_code=example.country_code, national_number=int(digits[:-4] + f"{rng.randrange(10_000):04d}")
        )
        if phonenumbers.is_valid_number(candidate):
            return phonenumbers.format_number(candidate, phonenumbers.PhoneNumberFormat.E164)
