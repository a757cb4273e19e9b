"""Tests for structgen.engine.detokenizer with the real SmolLM2 vocabulary and tokenizer."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structgen.engine.detokenizer import IncrementalDetokenizer
from structgen.engine.sampling_params import SamplingParams

REPLACEMENT = "\ufffd"


@pytest.fixture(scope="module")
def vocab(smollm2_vocab):
    return smollm2_vocab


@pytest.fixture(scope="module")
def token_of(vocab):
    """bytes -> the id of the token with exactly those bytes."""
    ids = {}
    for token, piece in enumerate(vocab.token_bytes):
        if piece:
            ids.setdefault(piece, token)
    return lambda piece: ids[piece]


@pytest.fixture(scope="module")
def encode(smollm2_tokenizer):
    return lambda text: smollm2_tokenizer.encode(text, add_special_tokens=False)


def detok(vocab, **params) -> IncrementalDetokenizer:
    return IncrementalDetokenizer(vocab, SamplingParams(**params))


def stream(d: IncrementalDetokenizer, chunks) -> tuple[list[str], str | None]:
    """Append each chunk of token ids, collecting deltas; then finish. -> (deltas, stop)."""
    deltas, stop = [], None
    for chunk in chunks:
        matched = d.append(chunk)
        stop = stop or matched
        deltas.append(d.take_new_text())
    deltas.append(d.finish())
    return deltas, stop


def one_by_one(ids):
    return [[token] for token in ids]


def reference_cut(text: str, stops: list[str], include: bool) -> tuple[str, str | None]:
    """The whole-text answer: cut at the stop string that is complete first."""
    matches = [(text.find(s) + len(s), text.find(s), s) for s in stops if s in text]
    if not matches:
        return text, None
    end, start, stop = min(matches)
    return text[: end if include else start], stop


# --------------------------------------------------------------------- UTF-8


def test_vocab_has_partial_utf8_tokens(vocab, token_of):
    # The tests below rely on these byte-level tokens existing in SmolLM2.
    for piece in (b"\xe2\x80", b"\x94", b"\xf0\x9f", b"\x98", b"\x80", b"\xe4\xb8"):
        with pytest.raises(UnicodeDecodeError):
            vocab.token_bytes[token_of(piece)].decode("utf-8")


def test_character_split_across_two_tokens_is_held_back(vocab, token_of):
    d = detok(vocab)
    d.append([token_of(b"a"), token_of(b"\xe2\x80")])  # "a" + first two bytes of an em dash
    assert d.take_new_text() == "a"
    assert d.text == "a"
    d.append([token_of(b"\x94")])
    assert d.take_new_text() == "\u2014"
    assert d.finish() == ""
    assert d.text == "a\u2014"


def test_emoji_split_across_three_tokens(vocab, token_of):
    d = detok(vocab)
    pieces = [b"\xf0\x9f", b"\x98", b"\x80", b"!"]
    deltas, _ = stream(d, [[token_of(p)] for p in pieces])
    assert deltas == ["", "", "\U0001f600", "!", ""]
    assert d.text == "\U0001f600!"


def test_real_tokenization_of_multibyte_text(vocab, encode):
    text = "caf\u00e9 \U0001f600 \u2014 \u4e2d\u6587 \u0928\u092e\u0938\u094d\u0924\u0947 \U0001f1ef\U0001f1f5"
    ids = encode(text)
    assert any(not vocab.token_bytes[t].decode("utf-8", "ignore") for t in ids)  # byte tokens
    d = detok(vocab)
    deltas, _ = stream(d, one_by_one(ids))
    assert "".join(deltas) == text == d.text
    assert not any(REPLACEMENT in delta for delta in deltas)


def test_incomplete_character_at_the_end_becomes_replacement(vocab, token_of):
    d = detok(vocab)
    d.append([token_of(b"x"), token_of(b"\xe2\x80")])
    assert d.take_new_text() == "x"
    assert d.finish() == REPLACEMENT
    assert d.text == "x" + REPLACEMENT
    assert d.finish() == ""  # idempotent


def test_invalid_byte_becomes_replacement_at_once(vocab, token_of):
    d = detok(vocab)
    d.append([token_of(b"\x94"), token_of(b"y")])  # a continuation byte with no lead byte
    assert d.take_new_text() == REPLACEMENT + "y"


# --------------------------------------------------------------------- special tokens


def test_special_tokens_and_eos_are_skipped(vocab, encode):
    ids = [1] + encode("hi") + [0, 2]  # <|im_start|> hi <|endoftext|> <|im_end|>=EOS
    d = detok(vocab)
    assert "".join(stream(d, [ids])[0]) == "hi"


def test_special_tokens_render_when_not_skipped(vocab, encode, smollm2_tokenizer):
    names = {t: smollm2_tokenizer.convert_ids_to_tokens(t) for t in vocab.special_ids | {2}}
    ids = [1] + encode("hi") + [2]
    shown = IncrementalDetokenizer(vocab, SamplingParams(skip_special_tokens=False), names)
    assert "".join(stream(shown, [ids])[0]) == "<|im_start|>hi"  # EOS is never text
    skipped = IncrementalDetokenizer(vocab, SamplingParams(), names)
    assert "".join(stream(skipped, [ids])[0]) == "hi"


def test_token_outside_the_tokenizer_is_an_error(vocab):
    with pytest.raises(ValueError):
        detok(vocab).append([vocab.tokenizer_size])


# --------------------------------------------------------------------- stop strings


def test_stop_string_spanning_three_tokens(vocab, encode):
    ids = encode("Hello world. The end")  # Hello | world | . | The | end
    assert len(ids) == 5
    d = detok(vocab, stop=["world. The"])
    results = [d.append([t]) for t in ids[:4]]
    assert results == [None, None, None, "world. The"]
    assert d.text == "Hello "
    assert d.take_new_text() == "Hello "
    assert d.append([ids[4]]) is None  # ignored after the stop
    assert d.finish() == "" and d.text == "Hello "


def test_text_that_may_start_a_stop_string_is_held_back(vocab, encode):
    d = detok(vocab, stop=["world. The"])
    for token, delta in zip(encode("Hello world."), ["Hello", " ", ""]):
        d.append([token])
        assert d.take_new_text() == delta
    assert d.text == "Hello world."
    assert d.finish() == "world."  # the sequence ended without the stop: release the tail
    assert d.text == "Hello world."


def test_stop_string_inside_a_split_character(vocab, token_of):
    d = detok(vocab, stop=["\u2014"])
    assert d.append([token_of(b"a"), token_of(b"\xe2\x80")]) is None
    assert d.append([token_of(b"\x94"), token_of(b"b")]) == "\u2014"
    assert d.text == "a"


def test_stop_at_the_very_start(vocab, encode):
    ids = encode("Hello there")
    d = detok(vocab, stop=["Hello"])
    assert d.append(ids[:1]) == "Hello"
    assert d.take_new_text() == "" and d.text == ""
    d = detok(vocab, stop=["Hello"], include_stop_str_in_output=True)
    assert d.append(ids) == "Hello"
    assert d.take_new_text() == "Hello" and d.finish() == ""


@pytest.mark.parametrize("include", [False, True])
@pytest.mark.parametrize(
    "text, stops",
    [
        ("aaab", ["aab"]),  # a candidate that fails, overlapping the real match
        ("abcd", ["abcd", "bc"]),  # the shorter stop completes first
        ("xab", ["ab", "xab"]),  # same end: the longer one
        ("one two three", ["three", "two"]),  # the earlier one, not the first listed
        ("abab abc", ["abc", "abd"]),
    ],
)
def test_overlapping_stop_candidates(vocab, encode, text, stops, include):
    expected = reference_cut(text, stops, include)
    assert expected[1] is not None
    ids = encode(text)
    for chunks in (one_by_one(ids), [ids]):
        d = detok(vocab, stop=stops, include_stop_str_in_output=include)
        deltas, stop = stream(d, chunks)
        assert ("".join(deltas), stop) == expected
        assert d.text == expected[0]


def test_include_stop_str_in_output(vocab, encode):
    d = detok(vocab, stop=["."], include_stop_str_in_output=True)
    deltas, stop = stream(d, one_by_one(encode("Hi there. More")))
    assert stop == "." and "".join(deltas) == "Hi there." == d.text


def test_held_text_is_released_when_the_candidate_fails(vocab, encode):
    d = detok(vocab, stop=["END!"])
    deltas, stop = stream(d, one_by_one(encode("the END is near, END")))
    assert stop is None
    assert "".join(deltas) == "the END is near, END"
    assert deltas[-1] == "END"  # held to the end, released by finish


# --------------------------------------------------------------------- properties

TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8", exclude_categories=("Cs",)),
        st.sampled_from("ab. \n\u00e9\u2014\u4e2d\U0001f600\U0001f44d\U0001f3fd"),
    ),
    max_size=40,
)
PROPERTY_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def split(ids: list[int], cuts: list[int]) -> list[list[int]]:
    bounds = sorted({0, len(ids), *(c % (len(ids) + 1) for c in cuts)})
    return [ids[a:b] for a, b in itertools.pairwise(bounds)]


@PROPERTY_SETTINGS
@given(text=TEXT, cuts=st.lists(st.integers(min_value=0), max_size=8))
def test_deltas_concatenate_to_the_decoded_text(vocab, encode, text, cuts):
    ids = encode(text)
    expected = vocab.decode(ids).decode("utf-8", errors="replace")
    d = detok(vocab)
    deltas, _ = stream(d, split(ids, cuts))
    assert "".join(deltas) == expected == d.text
    for delta in deltas:
        delta.encode("utf-8")  # no lone surrogates
        assert REPLACEMENT not in delta or REPLACEMENT in expected


@PROPERTY_SETTINGS
@given(
    text=TEXT,
    cuts=st.lists(st.integers(min_value=0), max_size=8),
    stop_spans=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 6)), min_size=1, max_size=3),
    extra_stop=st.text(alphabet="ab. \u2014", min_size=1, max_size=3),
    include=st.booleans(),
)
def test_stop_strings_cut_like_the_whole_text(
    vocab, encode, text, cuts, stop_spans, extra_stop, include
):
    ids = encode(text)
    decoded = vocab.decode(ids).decode("utf-8", errors="replace")
    stops = [decoded[s : s + n] for s, n in stop_spans if decoded[s : s + n]] + [extra_stop]
    expected_text, expected_stop = reference_cut(decoded, stops, include)
    longest = max(map(len, stops))

    d = detok(vocab, stop=stops, include_stop_str_in_output=include)
    emitted = ""
    for chunk in split(ids, cuts):
        d.append(chunk)
        emitted += d.take_new_text()
        assert expected_text.startswith(emitted)  # nothing streamed is ever taken back
        if not d.done:
            assert len(d.text) - len(emitted) < longest  # held back: less than one stop string
    emitted += d.finish()
    assert (emitted, d.stop_matched) == (expected_text, expected_stop)
    assert d.text == expected_text
