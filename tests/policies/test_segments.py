"""SMS encoding and segment counts follow GSM 03.38 and the concatenation rules, on any text."""

import gsm0338  # type: ignore[import-untyped]
from hypothesis import given
from hypothesis import strategies as st

from policies.segments import GSM_7, UCS_2, encode

CODEC = gsm0338.Codec()


def _encodable(character: str) -> bool:
    try:
        CODEC.encode(character)
    except UnicodeEncodeError:
        return False
    return True


# GSM-7 as the codec has it: every character it encodes, but ESC, which it writes as the escape
# code itself (no character of the alphabet).
GSM = "".join(c for c in map(chr, range(0x3000)) if _encodable(c) and c != "\x1b")
gsm_texts = st.text(alphabet=st.sampled_from(GSM), max_size=500)
any_texts = st.text(max_size=300)


def parts(units: list[int], capacity: int) -> list[list[int]]:
    """Split per-character sizes into segments of at most ``capacity`` units, never splitting a character."""
    split: list[list[int]] = [[]]
    for size in units:
        if sum(split[-1]) + size > capacity:
            split.append([])
        split[-1].append(size)
    return split


@given(gsm_texts)
def test_a_gsm_text_is_gsm_7_and_its_septets_are_what_the_codec_writes(text):
    encoded = encode(text)

    assert encoded.encoding == GSM_7
    assert encoded.units == len(CODEC.encode(text)[0])
    assert encoded.forcing_ucs2 == ()


@given(gsm_texts)
def test_a_gsm_text_fits_one_segment_up_to_160_septets_else_153_a_segment_with_escapes_kept_whole(text):
    encoded = encode(text)
    septets = [len(CODEC.encode(character)[0]) for character in text]

    if sum(septets) <= 160:
        assert encoded.segments == 1
    else:
        assert encoded.segments == len(parts(septets, 153))
        assert encoded.segments >= -(-sum(septets) // 153)


@given(any_texts.filter(lambda text: any(character not in GSM for character in text)))
def test_one_character_outside_gsm_7_makes_the_whole_text_ucs_2_with_70_or_67_units_a_segment(text):
    encoded = encode(text)
    units = [len(character.encode("utf-16-be")) // 2 for character in text]

    assert encoded.encoding == UCS_2
    assert encoded.units == sum(units)
    assert set(encoded.forcing_ucs2) == {c for c in text if c not in GSM}
    assert encoded.segments == (1 if sum(units) <= 70 else len(parts(units, 67)))


@given(any_texts, any_texts)
def test_a_longer_text_never_takes_fewer_segments(text, more):
    assert encode(text + more).segments >= encode(text).segments


def test_the_boundaries():
    assert encode("a" * 160).segments == 1
    assert encode("a" * 161).segments == 2
    assert encode("a" * 306).segments == 2
    assert encode("a" * 307).segments == 3
    assert encode("€" * 80).segments == 1  # 160 septets
    assert encode("a" * 152 + "€" + "a" * 10).segments == 2  # the escape pair moves whole to segment 2
    assert encode("α" * 70).segments == 1  # noqa: RUF001 (Greek on purpose)
    assert encode("α" * 71).segments == 2  # noqa: RUF001
    assert encode("😀" * 35).segments == 1  # 70 UTF-16 units
    assert encode("a" * 66 + "😀").segments == 1  # 68 units, one segment
    assert encode("a" * 66 + "😀" + "a" * 3).segments == 2  # 71 units: the pair is not split
    assert encode("a\x1bb").encoding == UCS_2  # a lone escape code is no character to send
