"""How an SMS text is encoded and how many segments it is billed (and delivered) as.

GSM-7 (3GPP TS 23.038) when every character is in its default alphabet or extension table:
160 septets in one segment; a character from the extension table (``€ [ ] { } ~ ^ | \\``)
takes two, an escape and the character, and the pair is never split between segments.
Otherwise UCS-2: 70 UTF-16 code units in one segment; a character outside the basic
plane takes two, a surrogate pair that is never split either. A concatenated message
gives 7 septets (GSM-7) or 3 code units (UCS-2) of each segment to its header, hence
153 and 67. The alphabet is the ``gsm0338`` codec's, not a table of ours.
"""

from dataclasses import dataclass
from functools import lru_cache

import gsm0338  # type: ignore[import-untyped]  # no stubs; one class used

GSM_7 = "GSM-7"
UCS_2 = "UCS-2"
# Units in one segment alone, and in each segment of a concatenated message.
_CAPACITY = {GSM_7: (160, 153), UCS_2: (70, 67)}
_CODEC = gsm0338.Codec()
ESCAPE = "\x1b"


@dataclass(frozen=True)
class Encoded:
    encoding: str
    characters: int
    units: int  # septets (GSM-7) or UTF-16 code units (UCS-2)
    segments: int
    forcing_ucs2: tuple[str, ...]  # the characters outside GSM-7, in order of first appearance


# Bounded: texts are the policies' own and Babel's, but a cache must not grow with its input.
@lru_cache(maxsize=4096)
def gsm_septets(character: str) -> int | None:
    """Septets ``character`` takes in GSM-7 (1, or 2 from the extension table), None outside it."""
    if character == ESCAPE:
        # The codec writes ESC as the escape code itself: sent, it would make the phone read the
        # next character from the extension table. It is no character of the alphabet.
        return None
    try:
        encoded, _ = _CODEC.encode(character)
    except UnicodeEncodeError:
        return None
    return len(encoded)


def _ucs2_units(character: str) -> int:
    return len(character.encode("utf-16-be")) // 2


def encode(text: str) -> Encoded:
    """Return the encoding ``text`` goes out in, its size in that encoding and its segment count."""
    septets = [gsm_septets(character) for character in text]
    if None not in septets:
        sizes = [size for size in septets if size is not None]
        return Encoded(GSM_7, len(text), sum(sizes), _segments(sizes, GSM_7), ())
    forcing = tuple(dict.fromkeys(character for character, size in zip(text, septets, strict=True) if size is None))
    sizes = [_ucs2_units(character) for character in text]
    return Encoded(UCS_2, len(text), sum(sizes), _segments(sizes, UCS_2), forcing)


def _segments(sizes: list[int], encoding: str) -> int:
    """Count segments, filling each as far as it goes without splitting a character's units."""
    single, each = _CAPACITY[encoding]
    if sum(sizes) <= single:
        return 1
    count, used = 1, 0
    for size in sizes:
        if used + size > each:
            count, used = count + 1, 0
        used += size
    return count


def describe(characters: tuple[str, ...]) -> str:
    """Name characters for a person reading an error: the character and its code point."""
    return ", ".join(f"{character!r} (U+{ord(character):04X})" for character in characters)
