"""Vocabulary: exact bytes per token id, on real tokenizers only.

SmolLM2 (GGUF, byte-level BPE, 49,152 tokens) and DeepSeek (byte-level BPE, 129,280 ids)
are the shipped tokenizers; SentencePiece-style tokenizers (Llama 2 style BPE with byte
fallback, Metaspace Unigram) and a WordPiece one are built here with `tokenizers`, and a
slow (pure-Python) byte-level tokenizer from SmolLM2's own vocab and merges.
"""

from __future__ import annotations

import json
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from structgen.default_model import DEFAULT_MODEL_NAME, default_gguf_path
from structgen.errors import StructgenError
from structgen.vocab import UnsupportedTokenizerError, Vocabulary, bytes_to_unicode

TEXTS = [
    "",
    "hello world",
    " leading space",
    "  two leading spaces",
    "trailing space ",
    "\n",
    "line one\nline two\r\n\tindented\n\n\n",
    '{"name": "José", "age": 42, "tags": ["a", "b"]}',
    "naïve café — “quotes” ‘single’ …",
    "日本語のテキストと中文文本",
    "한국어 텍스트",
    "Ελληνικά και русский текст",
    "emoji 😀👍🏽 family 👨‍👩‍👧‍👦 flag 🇫🇷",
    "math ∑ ∫ √ ≤ ≥ ≠ ∞",
    "def f(x):\n    return x ** 2  # comment\n",
    "\u200b zero width \ufeff bom \u00a0 nbsp",
    "12345678901234567890 3.14159 -0.5e-10",
    "mixed\ttabs\tand    spaces",
    "a" * 300,
    "<not|special> <|im_start> im_end|>",
]


SMOLLM2_MISSING_BYTES = {0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2, *range(0xF5, 0x100)}


def bytes_of(vocab: Vocabulary, tok, text: str) -> bytes:
    return vocab.decode(tok.encode(text, add_special_tokens=False))


# --------------------------------------------------------------------- SmolLM2


def test_smollm2_sizes_and_default(smollm2_vocab, smollm2_tokenizer):
    v = smollm2_vocab
    assert v.tokenizer_size == 49152 == len(smollm2_tokenizer)
    assert v.vocab_size == 49152 == len(v)
    assert len(v.token_bytes) == 49152
    assert all(isinstance(b, bytes) for b in v.token_bytes)
    assert v.name == DEFAULT_MODEL_NAME
    assert Vocabulary.default() is v  # cached
    assert default_gguf_path().name == "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_smollm2_special_and_eos(smollm2_vocab, smollm2_tokenizer):
    v, tok = smollm2_vocab, smollm2_tokenizer
    # The instruct model's EOS is <|im_end|>, not <|endoftext|>.
    assert tok.convert_ids_to_tokens(2) == "<|im_end|>"
    assert v.eos_token_ids == (2,)
    assert v.token_bytes[2] == b""
    assert 2 not in v.special_ids
    # <|endoftext|>, <|im_start|> and the 14 other added special tokens (<repo_name>, ...).
    assert v.special_ids == frozenset({0, 1, *range(3, 17)})
    for i in v.special_ids:
        assert v.token_bytes[i] == b""
    # Every other token stands for at least one byte.
    assert all(v.token_bytes[i] for i in range(17, v.tokenizer_size))


def test_smollm2_known_tokens(smollm2_vocab, smollm2_tokenizer):
    v, tok = smollm2_vocab, smollm2_tokenizer
    space_the = tok.convert_tokens_to_ids("Ġthe")
    assert v.token_bytes[space_the] == b" the"
    newline = tok.convert_tokens_to_ids("Ċ")
    assert v.token_bytes[newline] == b"\n"
    # 21 bytes have no token of their own (and appear in no longer token either): six
    # C0 controls, the never-valid UTF-8 bytes C0 C1 F5..FF, and the 4-byte lead bytes
    # F1 F2 (U+40000..U+BFFFF). SmolLM2 cannot write those characters at all.
    singles = {b[0] for b in v.token_bytes if len(b) == 1}
    assert set(range(256)) - singles == SMOLLM2_MISSING_BYTES
    assert not any(set(b) & SMOLLM2_MISSING_BYTES for b in v.token_bytes)


def test_deepseek_has_every_single_byte(deepseek_vocab):
    assert {b[0] for b in deepseek_vocab.token_bytes if len(b) == 1} == set(range(256))


@pytest.mark.parametrize("which", ["smollm2", "deepseek"])
def test_token_bytes_equal_decode(which, request):
    """token_bytes[i] is what the tokenizer decodes token i to (lossy for partial UTF-8)."""
    tok = request.getfixturevalue(f"{which}_tokenizer")
    v = request.getfixturevalue(f"{which}_vocab")
    decoded = tok.backend_tokenizer.decode_batch(
        [[i] for i in range(v.tokenizer_size)], skip_special_tokens=False
    )
    valid = partial = 0
    for i, text in enumerate(decoded):
        if i in v.special_ids or i in v.eos_token_ids:
            continue
        data = v.token_bytes[i]
        try:
            assert data.decode("utf-8") == text, i
            valid += 1
        except UnicodeDecodeError:
            # A piece of a multi-byte character: decoding alone gives U+FFFD replacements.
            assert data.decode("utf-8", errors="replace") == text, i
            partial += 1
    assert valid > 0.95 * v.tokenizer_size
    assert partial > 100  # byte-level BPE really has partial-character tokens


@pytest.mark.parametrize("which", ["smollm2", "deepseek"])
@pytest.mark.parametrize("text", TEXTS)
def test_encode_round_trip(which, text, request):
    tok = request.getfixturevalue(f"{which}_tokenizer")
    v = request.getfixturevalue(f"{which}_vocab")
    assert bytes_of(v, tok, text) == text.encode("utf-8")


def test_round_trip_random_unicode(smollm2_vocab, smollm2_tokenizer, deepseek_vocab, deepseek_tokenizer):
    @settings(max_examples=100, deadline=None, database=None)
    @given(text=st.text(max_size=60))
    def check(text):
        assert bytes_of(deepseek_vocab, deepseek_tokenizer, text) == text.encode("utf-8")
        # SmolLM2's tokenizer silently drops the bytes its vocabulary cannot spell.
        spellable = bytes(b for b in text.encode("utf-8") if b not in SMOLLM2_MISSING_BYTES)
        assert bytes_of(smollm2_vocab, smollm2_tokenizer, text) == spellable

    check()


def test_partial_utf8_tokens_concatenate(smollm2_vocab, smollm2_tokenizer):
    """A rare character split across tokens: no single token decodes, the bytes join up."""
    v, tok = smollm2_vocab, smollm2_tokenizer
    text = "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🦜"
    ids = tok.encode(text, add_special_tokens=False)
    pieces = [v.token_bytes[i] for i in ids]
    assert any(_invalid_utf8(p) for p in pieces)
    assert b"".join(pieces) == text.encode()


def _invalid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


# --------------------------------------------------------------------- DeepSeek


def test_deepseek_sizes_special_and_added(deepseek_vocab, deepseek_tokenizer):
    v, tok = deepseek_vocab, deepseek_tokenizer
    assert v.tokenizer_size == len(tok) == 129280
    assert v.vocab_size == 129280
    assert v.eos_token_ids == (tok.eos_token_id,) == (1,)  # <｜end▁of▁sentence｜>
    assert v.token_bytes[1] == b""
    assert {0, 2} <= v.special_ids  # begin▁of▁sentence, ▁pad▁
    assert 128000 in v.special_ids  # <｜place▁holder▁no▁0｜>
    # Added tokens that are not special stand for their text.
    eot = tok.convert_tokens_to_ids("<|EOT|>")
    assert eot not in v.special_ids
    assert v.token_bytes[eot] == b"<|EOT|>"
    user = tok.convert_tokens_to_ids("<｜User｜>")
    assert v.token_bytes[user] == "<｜User｜>".encode()
    # And the special ones are exactly the added tokens marked special.
    marked = {i for i, t in tok.added_tokens_decoder.items() if t.special} - {1}
    assert v.special_ids == marked


# --------------------------------------------------------------------- construction


def test_padded_vocab_size(smollm2_tokenizer, smollm2_vocab):
    padded = Vocabulary.from_tokenizer(smollm2_tokenizer, vocab_size=49152 + 128)
    assert padded.tokenizer_size == 49152
    assert padded.vocab_size == len(padded) == 49280
    assert padded.token_bytes == smollm2_vocab.token_bytes
    assert padded.fingerprint != smollm2_vocab.fingerprint
    with pytest.raises(ValueError, match="not in the tokenizer"):
        padded.decode([49200])
    # A smaller vocab_size never truncates the tokenizer.
    assert Vocabulary.from_tokenizer(smollm2_tokenizer, vocab_size=100).vocab_size == 49152


def test_eos_extension_and_fingerprint(smollm2_tokenizer, smollm2_vocab):
    again = Vocabulary.from_tokenizer(smollm2_tokenizer, name=DEFAULT_MODEL_NAME)
    assert again == smollm2_vocab and again.fingerprint == smollm2_vocab.fingerprint
    assert hash(again) == hash(smollm2_vocab)

    v = Vocabulary.from_tokenizer(smollm2_tokenizer, eos_token_ids=[0, 2])
    assert v.eos_token_ids == (2, 0)  # tok.eos_token_id first, no duplicates
    assert 0 not in v.special_ids and 1 in v.special_ids
    assert v.fingerprint != smollm2_vocab.fingerprint
    with pytest.raises(ValueError, match="outside"):
        Vocabulary.from_tokenizer(smollm2_tokenizer, eos_token_ids=[49152])


def test_constructor_and_decode():
    v = Vocabulary([b"a", b"bc", b"<s>", b"\xff", b"end"], special_ids=[2], eos_token_ids=[4], vocab_size=8)
    assert v.token_bytes == (b"a", b"bc", b"", b"\xff", b"")  # special and EOS carry no bytes
    assert v.special_ids == frozenset({2}) and v.eos_token_ids == (4,)
    assert (v.tokenizer_size, v.vocab_size, len(v)) == (5, 8, 8)
    assert v.decode([0, 1, 2, 3, 4]) == b"abc\xff"
    assert v.decode([]) == b""
    with pytest.raises(ValueError):
        v.decode([-1])
    with pytest.raises(ValueError):
        v.decode([5])
    # EOS wins over special.
    w = Vocabulary([b"a", b"b"], special_ids=[1], eos_token_ids=[1])
    assert w.special_ids == frozenset() and w.eos_token_ids == (1,)


def test_immutable_pickle_and_derived(smollm2_vocab):
    v = smollm2_vocab
    with pytest.raises(AttributeError):
        v.vocab_size = 5
    with pytest.raises(AttributeError):
        v.extra = 1
    with pytest.raises(AttributeError):
        del v.token_bytes
    clone = pickle.loads(pickle.dumps(v))
    assert clone == v and clone.token_bytes == v.token_bytes and clone.name == v.name
    assert clone.special_ids == v.special_ids and clone.eos_token_ids == v.eos_token_ids

    calls = []

    def build(vocab):
        calls.append(1)
        return max(len(b) for b in vocab.token_bytes)

    assert v.derived("test:max_len", build) == v.derived("test:max_len", build)
    assert len(calls) == 1


def test_from_pretrained_folder_reads_model_config(tmp_path, smollm2_tokenizer, smollm2_vocab):
    smollm2_tokenizer.save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 49216}))
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 0]}))
    v = Vocabulary.from_pretrained(tmp_path)
    assert v.token_bytes == smollm2_vocab.token_bytes
    assert v.vocab_size == 49216 and v.tokenizer_size == 49152
    assert v.eos_token_ids == (2, 0)
    assert Vocabulary.from_pretrained(tmp_path, vocab_size=49152).vocab_size == 49152


def test_from_pretrained_gguf(smollm2_vocab):
    v = Vocabulary.from_pretrained(default_gguf_path())
    assert v.token_bytes == smollm2_vocab.token_bytes
    assert v.fingerprint == smollm2_vocab.fingerprint


@pytest.mark.parametrize("which", ["smollm2", "deepseek"])
def test_tokenizer_folder_equals_transformers(which, tmp_path, request):
    """Read with `tokenizers` alone, a saved tokenizer gives the same table, specials and
    EOS as the transformers tokenizer it was saved from."""
    tok = request.getfixturevalue(f"{which}_tokenizer")
    expected = Vocabulary.from_tokenizer(tok, name="x")
    tok.save_pretrained(tmp_path)
    got = Vocabulary.from_tokenizer_folder(tmp_path, name="x")
    assert got.token_bytes == expected.token_bytes
    assert got.special_ids == expected.special_ids and got.eos_token_ids == expected.eos_token_ids
    assert got.fingerprint == expected.fingerprint


DEFAULT_IN_FRESH_PROCESS = """
import json, sys, structgen
vocab = structgen.Vocabulary.default()
print(json.dumps({"fingerprint": vocab.fingerprint, "modules": sorted(sys.modules)}))
"""


def test_default_vocabulary_loads_without_transformers_and_comes_prepared(tmp_path, smollm2_vocab):
    """A process whose tokenizer cache is warm loads the default vocabulary without
    importing transformers, gets the same vocabulary as one that converted the GGUF file,
    and has the compiler's modules loaded before its first compile."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, STRUCTGEN_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", DEFAULT_IN_FRESH_PROCESS], env=env, check=True,
                           capture_output=True, text=True) for _ in ("cold", "warm")]
    cold, warm = (json.loads(run.stdout.splitlines()[-1]) for run in runs)
    assert cold["fingerprint"] == warm["fingerprint"] == smollm2_vocab.fingerprint
    assert "transformers" in cold["modules"]  # the first process converts the GGUF file
    assert "transformers" not in warm["modules"] and "torch" not in warm["modules"]
    assert "structgen.grammar.json_schema" in warm["modules"]


def test_from_pretrained_never_downloads(tmp_path):
    with pytest.raises(OSError):
        Vocabulary.from_pretrained("structgen-test/definitely-not-a-local-model")


# --------------------------------------------------------------------- SentencePiece

SP_SPECIALS = ["<unk>", "<s>", "</s>"]
SP_BYTES = [f"<0x{b:02X}>" for b in range(256)]
SP_CORPUS = [
    "hello world",
    "the quick brown fox jumps over the lazy dog",
    "hello there, world!",
    "def f(x):\n    return x",
] * 20


def _wrap(backend: Tokenizer) -> PreTrainedTokenizerFast:
    backend.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SP_SPECIALS])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )


def llama2_style_bpe() -> PreTrainedTokenizerFast:
    """Llama 2 layout: <unk> <s> </s>, 256 <0xXX> pieces, then BPE pieces with ▁."""
    prep = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trained = Tokenizer(models.BPE())
    trained.normalizer = prep
    trained.train_from_iterator(SP_CORPUS, trainers.BpeTrainer(vocab_size=200, show_progress=False))
    spec = json.loads(trained.to_str())["model"]
    learned = sorted(spec["vocab"], key=spec["vocab"].get)
    vocab = {p: i for i, p in enumerate(SP_SPECIALS + SP_BYTES + learned)}
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in spec["merges"]]
    bpe = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    bpe.normalizer = prep
    bpe.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    return _wrap(bpe)


def metaspace_unigram() -> PreTrainedTokenizerFast:
    """T5/XLNet-like: Unigram with Metaspace pre-tokenizer/decoder and byte fallback."""
    pieces = ["▁", "▁hello", "▁world", "▁the", "he", "llo", "wor", "ld"] + list("abcdefghijklmnopqrstuvwxyz,.!")
    vocab = (
        [(s, 0.0) for s in SP_SPECIALS]
        + [(b, -20.0) for b in SP_BYTES]
        + [(p, -float(len(pieces) - len(p))) for p in pieces]
    )
    uni = Tokenizer(models.Unigram(vocab, unk_id=0, byte_fallback=True))
    uni.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    uni.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(replacement="▁", prepend_scheme="first")])
    return _wrap(uni)


SP_BUILDERS = {
    # What the tokenizer's normalization makes of the text: the bytes its tokens spell.
    "llama2_bpe": (llama2_style_bpe, lambda t: " " + t),
    "metaspace_unigram": (metaspace_unigram, lambda t: t if t.startswith(" ") else " " + t),
}


@pytest.fixture(scope="module", params=sorted(SP_BUILDERS))
def sp_case(request):
    build, normalized = SP_BUILDERS[request.param]
    tok = build()
    return tok, Vocabulary.from_tokenizer(tok), normalized


def test_sentencepiece_pieces(sp_case):
    tok, v, _ = sp_case
    assert v.tokenizer_size == len(tok)
    assert v.eos_token_ids == (2,)
    assert v.special_ids == frozenset({0, 1})
    for b in range(256):  # <0xXX> byte-fallback pieces are that single byte
        assert v.token_bytes[3 + b] == bytes([b])
    assert v.token_bytes[tok.convert_tokens_to_ids("▁")] == b" "
    hello = tok.convert_tokens_to_ids("▁hello")
    assert hello is not None and v.token_bytes[hello] == b" hello"
    assert all("▁".encode() not in b for b in v.token_bytes)


@pytest.mark.parametrize("text", [t for t in TEXTS if t] + ["hello world", "Hello, World!"])
def test_sentencepiece_round_trip(sp_case, text):
    tok, v, normalized = sp_case
    ids = tok.encode(text, add_special_tokens=False)
    assert v.decode(ids) == normalized(text).encode()
    # The tokenizer's own decode strips the one leading space it added.
    assert v.decode(ids).decode()[1:] == tok.decode(ids, clean_up_tokenization_spaces=False)


def test_sentencepiece_byte_fallback_really_used(sp_case):
    tok, v, normalized = sp_case
    text = "emoji 😀 wörld"
    ids = tok.encode(text, add_special_tokens=False)
    byte_ids = [i for i in ids if 3 <= i < 259]
    assert len(byte_ids) >= 6  # 4 bytes of 😀, 2 of ö
    assert v.decode(ids) == normalized(text).encode()
    assert v.decode(byte_ids) == "😀ö".encode()


# --------------------------------------------------------------------- other tokenizers


def test_slow_byte_level_tokenizer_matches_fast(tmp_path, smollm2_tokenizer, smollm2_vocab):
    """A slow (pure-Python) GPT-2 style tokenizer over SmolLM2's own vocab and merges."""
    from transformers.models.clvp.tokenization_clvp import ClvpTokenizer

    spec = json.loads(smollm2_tokenizer.backend_tokenizer.to_str())["model"]
    (tmp_path / "vocab.json").write_text(json.dumps(spec["vocab"]))
    merges = [" ".join(m) if isinstance(m, list) else m for m in spec["merges"]]
    (tmp_path / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    slow = ClvpTokenizer(
        str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"),
        bos_token="<|im_start|>", eos_token="<|im_end|>", pad_token="<|im_end|>", unk_token="<|endoftext|>",
    )
    assert not hasattr(slow, "backend_tokenizer")
    v = Vocabulary.from_tokenizer(slow)
    assert v.tokenizer_size == 49152
    assert v.eos_token_ids == (2,)
    assert {0, 1} <= v.special_ids
    # 3..16 are special only in the GGUF tokenizer's added-token table.
    assert v.token_bytes[17:] == smollm2_vocab.token_bytes[17:]
    # (CLVP's own text cleaner lowercases and ASCII-folds its input, so keep to that.)
    ids = slow.encode("hello world, the quick brown fox.", add_special_tokens=False)
    assert v.decode(ids) == b"hello world, the quick brown fox."
    assert v.decode(ids) == slow.decode(ids).encode()


def test_wordpiece_is_refused():
    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "hello": 3, "world": 4, "##s": 5}
    wp = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    wp.pre_tokenizer = pre_tokenizers.Whitespace()
    wp.decoder = decoders.WordPiece()
    tok = PreTrainedTokenizerFast(tokenizer_object=wp, unk_token="[UNK]")
    with pytest.raises(UnsupportedTokenizerError, match="WordPiece") as err:
        Vocabulary.from_tokenizer(tok)
    assert isinstance(err.value, StructgenError)


def test_bytes_to_unicode_is_a_bijection():
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert len(set(table.values())) == 256
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("a")] == "a"
