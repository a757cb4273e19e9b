"""Token id -> exact bytes, for any transformers tokenizer.

This module owns one thing: turning a tokenizer into a `Vocabulary`, the immutable table
of the bytes every token id stands for, plus which ids are special (never produced under
a grammar) and which are end-of-sequence. Grammars, automata, masks and the engine live
elsewhere and only read a `Vocabulary`; nothing here may import them.

Bytes, not characters: a byte-level BPE token can be half of a UTF-8 character, so
`token_bytes[i]` is what the token contributes to the output byte stream, exactly.

Supported tokenizer schemes, detected once per tokenizer (never guessed per token):

* byte-level BPE (GPT-2 `bytes_to_unicode` map, `Ġ` = space): SmolLM2, Llama 3, Qwen,
  DeepSeek, GPT-NeoX, ... — detected from a `ByteLevel` decoder/pre-tokenizer
  (fast tokenizers) or a `byte_decoder` attribute (slow tokenizers);
* SentencePiece (`▁` = space, `<0x0A>` byte-fallback pieces = that one byte): Llama 2,
  Mistral, Gemma, T5, ... — detected from a `Metaspace` / `Replace("▁", " ")` /
  `ByteFallback` decoder (fast) or an `sp_model` attribute (slow).

Added tokens that are not special stand for their content, UTF-8 encoded. Special
tokens (bos, pad, unk, `<|im_start|>`, reserved tokens, ...) and ids with no token get
b"" and are listed in `special_ids`; EOS ids get b"" and are listed in `eos_token_ids`
only. A model's logits row may be longer than the tokenizer (`vocab_size` >
`tokenizer_size`): ids in `range(tokenizer_size, vocab_size)` have no bytes and must
never be allowed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from array import array
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from structgen.errors import StructgenError

__all__ = ["Vocabulary", "UnsupportedTokenizerError", "bytes_to_unicode"]

T = TypeVar("T")

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_SPIECE_UNDERLINE = "\u2581"  # ▁


class UnsupportedTokenizerError(StructgenError):
    """The tokenizer's scheme cannot be mapped to exact bytes per token (e.g. WordPiece)."""


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode character map (byte-level BPE)."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


_UNICODE_TO_BYTE: dict[str, int] = {c: b for b, c in bytes_to_unicode().items()}


class Vocabulary:
    """Immutable table: token id -> bytes, special ids, EOS ids, padded size.

    Build it with `from_tokenizer`, `from_pretrained` or `default()`; the constructor
    takes the table itself and uses it as given (no EOS is added).
    """

    __slots__ = (
        "token_bytes",
        "special_ids",
        "eos_token_ids",
        "tokenizer_size",
        "vocab_size",
        "fingerprint",
        "name",
        "_derived",
        "_lock",
        "__weakref__",
    )

    token_bytes: tuple[bytes, ...]
    special_ids: frozenset[int]
    eos_token_ids: tuple[int, ...]
    tokenizer_size: int
    vocab_size: int
    fingerprint: str
    name: str

    def __init__(
        self,
        token_bytes: Sequence[bytes],
        *,
        special_ids: Iterable[int] = (),
        eos_token_ids: Iterable[int] = (),
        vocab_size: int | None = None,
        name: str = "",
    ):
        tb = tuple(bytes(b) for b in token_bytes)
        n = len(tb)
        eos = tuple(dict.fromkeys(int(i) for i in eos_token_ids))
        for i in eos:
            if not 0 <= i < n:
                raise ValueError(f"EOS token id {i} is outside the tokenizer (size {n})")
        specials = frozenset(int(i) for i in special_ids) - set(eos)
        for i in specials:
            if not 0 <= i < n:
                raise ValueError(f"special token id {i} is outside the tokenizer (size {n})")
        if any(tb[i] for i in specials) or any(tb[i] for i in eos):
            # Specials and EOS stand for no text: a mask must never reach them via bytes.
            tb = tuple(b"" if (i in specials or i in eos) else b for i, b in enumerate(tb))
        padded = n if vocab_size is None else max(n, int(vocab_size))

        h = hashlib.sha256(b"structgen-vocabulary-v1\0")
        h.update(f"{n} {padded}\0".encode())
        h.update(array("Q", [len(b) for b in tb]).tobytes())
        h.update(b"".join(tb))
        h.update(("\0" + ",".join(map(str, sorted(specials)))).encode())
        h.update(("\0" + ",".join(map(str, eos))).encode())

        set_ = object.__setattr__
        set_(self, "token_bytes", tb)
        set_(self, "special_ids", specials)
        set_(self, "eos_token_ids", eos)
        set_(self, "tokenizer_size", n)
        set_(self, "vocab_size", padded)
        set_(self, "fingerprint", h.hexdigest())
        set_(self, "name", name)
        set_(self, "_derived", {})
        set_(self, "_lock", threading.Lock())

    # ----------------------------------------------------------------- construction

    @classmethod
    def from_tokenizer(
        cls,
        tok: Any,
        vocab_size: int | None = None,
        *,
        eos_token_ids: Iterable[int] = (),
        name: str | None = None,
    ) -> Vocabulary:
        """The vocabulary of a transformers tokenizer (fast or slow).

        `vocab_size`: the model's logits width when it is larger than the tokenizer.
        `eos_token_ids`: extra end-of-sequence ids (e.g. from a generation config),
        added to `tok.eos_token_id`, which is always an EOS.
        """
        backend = getattr(tok, "backend_tokenizer", None)
        if backend is not None and hasattr(backend, "to_str"):
            pieces, specials = _fast_tokenizer_bytes(tok, backend)
        elif hasattr(tok, "byte_decoder"):
            pieces, specials = _slow_byte_level_bytes(tok)
        elif hasattr(tok, "sp_model"):
            pieces, specials = _slow_sentencepiece_bytes(tok)
        else:
            raise UnsupportedTokenizerError(
                f"cannot map the tokens of {type(tok).__name__} to bytes: neither a fast "
                "(tokenizers) tokenizer nor a byte-level / SentencePiece slow tokenizer"
            )
        n = len(pieces)
        for i in getattr(tok, "all_special_ids", None) or ():
            if isinstance(i, int) and 0 <= i < n:
                specials.add(i)
        eos = [tok.eos_token_id] if isinstance(getattr(tok, "eos_token_id", None), int) else []
        eos += [int(i) for i in eos_token_ids]
        if name is None:
            name = str(getattr(tok, "name_or_path", "") or type(tok).__name__)
        return cls(pieces, special_ids=specials, eos_token_ids=eos, vocab_size=vocab_size, name=name)

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike, **kw: Any) -> Vocabulary:
        """Load a transformers tokenizer locally (never from the network) and wrap it.

        `name_or_path`: a model folder, a `.gguf` file, or a name already in the local
        Hugging Face cache. `vocab_size=` and `eos_token_ids=` go to `from_tokenizer`;
        other keywords go to `AutoTokenizer.from_pretrained`. For a local folder, the
        padded `vocab_size` is read from `config.json` and extra EOS ids from
        `generation_config.json` when present and not given.
        """
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        vocab_size = kw.pop("vocab_size", None)
        eos = list(kw.pop("eos_token_ids", ()) or ())
        path = Path(name_or_path)
        if path.suffix == ".gguf" and path.is_file():
            if kw:
                raise TypeError(f"unexpected keywords for a .gguf file: {sorted(kw)}")
            from structgen.default_model import load_tokenizer_from_gguf

            tok = load_tokenizer_from_gguf(path)
        else:
            from transformers import AutoTokenizer

            kw.setdefault("local_files_only", True)
            tok = AutoTokenizer.from_pretrained(str(name_or_path), **kw)
            if path.is_dir():
                config = _read_json(path / "config.json")
                text_config = config.get("text_config") or {}
                if vocab_size is None:
                    vocab_size = config.get("vocab_size") or text_config.get("vocab_size")
                gen_eos = _read_json(path / "generation_config.json").get("eos_token_id")
                if isinstance(gen_eos, int):
                    eos.append(gen_eos)
                elif isinstance(gen_eos, list):
                    eos.extend(i for i in gen_eos if isinstance(i, int))
        return cls.from_tokenizer(tok, vocab_size, eos_token_ids=eos, name=str(name_or_path))

    @classmethod
    def from_tokenizer_folder(
        cls, folder: str | os.PathLike, vocab_size: int | None = None, *, name: str | None = None
    ) -> Vocabulary:
        """The vocabulary of a saved fast tokenizer, read with `tokenizers` alone.

        `folder` holds `tokenizer.json` and, optionally, `tokenizer_config.json` (its
        bos/eos/unk/pad and extra special tokens). The result equals `from_tokenizer` on
        the same folder loaded by transformers, without importing transformers (~2 s).
        """
        files = _SavedTokenizer(Path(folder))
        return cls.from_tokenizer(files, vocab_size, name=name or str(folder))

    @classmethod
    def default(cls) -> Vocabulary:
        """The vocabulary of the default model (SmolLM2-135M-Instruct GGUF), cached.

        It comes ready to compile against (`structgen.compiler.prepare`): the first
        compile in a process then costs what later ones do.
        """
        return _default_vocabulary()

    # ----------------------------------------------------------------- use

    def decode(self, ids: Iterable[int]) -> bytes:
        """The bytes a sequence of token ids stands for (special/EOS ids give b"")."""
        tb = self.token_bytes
        n = self.tokenizer_size
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < n:
                raise ValueError(
                    f"token id {i} is not in the tokenizer (size {n}, padded to {self.vocab_size})"
                )
            out.append(tb[i])
        return b"".join(out)

    def derived(self, key: str, build: Callable[[Vocabulary], T]) -> T:
        """`build(self)`, computed once per vocabulary and key, then cached on it.

        The hook for layers that precompute arrays over the vocabulary (byte matrices,
        token tries): the vocabulary stays immutable and its users own their arrays.
        """
        try:
            return self._derived[key]
        except KeyError:
            pass
        with self._lock:
            if key not in self._derived:
                self._derived[key] = build(self)
            return self._derived[key]

    def __len__(self) -> int:
        return self.vocab_size

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and other.fingerprint == self.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        return (
            f"Vocabulary({self.name!r}, tokenizer_size={self.tokenizer_size}, "
            f"vocab_size={self.vocab_size}, special={len(self.special_ids)}, "
            f"eos={list(self.eos_token_ids)}, fingerprint={self.fingerprint[:12]})"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Vocabulary is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Vocabulary is immutable")

    def __reduce__(self):
        return (
            _rebuild,
            (self.token_bytes, self.special_ids, self.eos_token_ids, self.vocab_size, self.name),
        )


def _rebuild(token_bytes, special_ids, eos_token_ids, vocab_size, name) -> Vocabulary:
    return Vocabulary(
        token_bytes,
        special_ids=special_ids,
        eos_token_ids=eos_token_ids,
        vocab_size=vocab_size,
        name=name,
    )


_default_lock = threading.Lock()
_default_vocab: Vocabulary | None = None


def _default_vocabulary() -> Vocabulary:
    global _default_vocab
    with _default_lock:
        if _default_vocab is None:
            from structgen import default_model as model

            folder = model.cached_tokenizer_folder(model.default_gguf_path())
            if folder is not None:
                vocab = Vocabulary.from_tokenizer_folder(folder, name=model.DEFAULT_MODEL_NAME)
            else:
                vocab = Vocabulary.from_tokenizer(
                    model.load_default_tokenizer(), name=model.DEFAULT_MODEL_NAME
                )
            from structgen.compiler import prepare

            prepare(vocab)
            _default_vocab = vocab
        return _default_vocab


def _read_json(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# --------------------------------------------------------------------- fast tokenizers


class _SavedTokenizer:
    """What `Vocabulary.from_tokenizer` reads from a tokenizer, taken from a saved
    folder's `tokenizer.json` and `tokenizer_config.json` instead of a transformers object."""

    _SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token")

    def __init__(self, folder: Path):
        from tokenizers import Tokenizer

        self.backend_tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        config = _read_json(folder / "tokenizer_config.json")
        extra = config.get("additional_special_tokens") or config.get("extra_special_tokens")
        named = [config.get(key) for key in self._SPECIAL_KEYS]
        named += list(extra.values() if isinstance(extra, dict) else extra or [])
        ids = (self._id(token) for token in named)
        self.all_special_ids = list(dict.fromkeys(i for i in ids if i is not None))
        self.eos_token_id = self._id(config.get("eos_token"))
        self.added_tokens_decoder: dict = {}  # from_tokenizer then asks the backend
        self.name_or_path = str(folder)

    def _id(self, token: Any) -> int | None:
        if isinstance(token, dict):  # older configs save {"content": "<s>", ...}
            token = token.get("content")
        return self.backend_tokenizer.token_to_id(token) if isinstance(token, str) else None

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)



def _flatten(node: Any, key: str) -> list[dict]:
    """The components of a tokenizers.json pipeline stage, with Sequences flattened."""
    if not isinstance(node, dict):
        return []
    if node.get("type") == "Sequence":
        return [c for child in node.get(key) or [] for c in _flatten(child, key)]
    return [node]


def _fast_tokenizer_bytes(tok: Any, backend: Any) -> tuple[list[bytes], set[int]]:
    spec = json.loads(backend.to_str())
    model = spec.get("model") or {}
    decoders = _flatten(spec.get("decoder"), "decoders")
    pretoks = _flatten(spec.get("pre_tokenizer"), "pretokenizers")
    dtypes = {d.get("type") for d in decoders}
    ptypes = {p.get("type") for p in pretoks}

    added = dict(getattr(tok, "added_tokens_decoder", None) or {})
    if not added:
        added = dict(backend.get_added_tokens_decoder())
    n = max([len(tok), backend.get_vocab_size(with_added_tokens=True), *(i + 1 for i in added)])

    if "ByteLevel" in dtypes or "ByteLevel" in ptypes:
        convert = _byte_level_piece
    elif dtypes & {"Metaspace", "Replace", "ByteFallback"} or "Metaspace" in ptypes:
        space = _SPIECE_UNDERLINE
        for d in decoders:
            if d.get("type") == "Metaspace":
                space = d.get("replacement") or space
            elif d.get("type") == "Replace" and (d.get("content") == " "):
                space = (d.get("pattern") or {}).get("String") or space
        byte_fallback = "ByteFallback" in dtypes or bool(model.get("byte_fallback"))
        convert = _sentencepiece_converter(space, byte_fallback)
    else:
        raise UnsupportedTokenizerError(
            f"cannot map tokens to exact bytes for a tokenizer with decoder "
            f"{sorted(t for t in dtypes if t) or None} (model {model.get('type')}): only "
            "byte-level BPE and SentencePiece (Metaspace / byte fallback) are supported"
        )

    pieces, specials = _pieces_by_id(n, added, backend.id_to_token, convert)
    unk = model.get("unk_token")
    unk_id = model.get("unk_id")
    if isinstance(unk, str) and backend.token_to_id(unk) is not None:
        specials.add(backend.token_to_id(unk))
    if isinstance(unk_id, int) and 0 <= unk_id < n:
        specials.add(unk_id)
    return pieces, specials


def _byte_level_piece(piece: str, table: dict[str, int] = _UNICODE_TO_BYTE) -> bytes:
    # As the tokenizers ByteLevel decoder does: a piece with a character outside the
    # byte map stands for its own UTF-8 bytes.
    try:
        return bytes([table[c] for c in piece])
    except KeyError:
        return piece.encode("utf-8")


def _sentencepiece_converter(space: str, byte_fallback: bool) -> Callable[[str], bytes]:
    def convert(piece: str) -> bytes:
        if byte_fallback:
            m = _BYTE_PIECE.fullmatch(piece)
            if m:
                return bytes([int(m.group(1), 16)])
        return piece.replace(space, " ").encode("utf-8")

    return convert


# --------------------------------------------------------------------- slow tokenizers


def _pieces_by_id(
    n: int,
    added: dict[int, Any],
    piece_of: Callable[[int], Any],
    convert: Callable[[str], bytes],
) -> tuple[list[bytes], set[int]]:
    """Bytes of ids 0..n-1 and the special ids: added tokens by their content (special
    ones b""), the rest by converting the tokenizer's piece; an id with no piece (a hole
    in the id space) counts as special."""
    specials: set[int] = set()
    pieces: list[bytes] = []
    for i in range(n):
        at = added.get(i)
        if at is not None:
            pieces.append(_added_token_bytes(at))
            if getattr(at, "special", False):
                specials.add(i)
            continue
        piece = piece_of(i)
        if not isinstance(piece, str):
            specials.add(i)
            pieces.append(b"")
        else:
            pieces.append(convert(piece))
    return pieces, specials


def _added_token_bytes(token: Any) -> bytes:
    """An added token's bytes: b"" for a special one, else its content as UTF-8."""
    if getattr(token, "special", False):
        return b""
    return str(getattr(token, "content", token)).encode("utf-8")


def _slow_added(tok: Any) -> dict[int, Any]:
    return dict(getattr(tok, "added_tokens_decoder", None) or {})


def _slow_bytes(tok: Any, convert: Callable[[str], bytes]) -> tuple[list[bytes], set[int]]:
    added = _slow_added(tok)
    n = max([len(tok), *(i + 1 for i in added)])

    def piece_of(i: int) -> str | None:
        try:
            return tok.convert_ids_to_tokens(i)
        except (IndexError, KeyError):
            return None

    return _pieces_by_id(n, added, piece_of, convert)


def _slow_byte_level_bytes(tok: Any) -> tuple[list[bytes], set[int]]:
    table = {c: int(b) for c, b in tok.byte_decoder.items()}
    return _slow_bytes(tok, lambda piece: _byte_level_piece(piece, table))


def _slow_sentencepiece_bytes(tok: Any) -> tuple[list[bytes], set[int]]:
    sp = tok.sp_model
    size = sp.get_piece_size()
    byte_fallback = any(sp.is_byte(i) for i in range(size))
    pieces, specials = _slow_bytes(tok, _sentencepiece_converter(_SPIECE_UNDERLINE, byte_fallback))
    # Control and unknown pieces (<s>, </s>, <unk>, <pad>) stand for no text.
    for i in range(len(pieces)):
        if i in specials:
            continue
        piece = tok.convert_ids_to_tokens(i)
        sp_id = sp.piece_to_id(piece) if isinstance(piece, str) else None
        if sp_id is not None and 0 <= sp_id < size and sp.id_to_piece(sp_id) == piece:
            if sp.is_control(sp_id) or sp.is_unknown(sp_id) or sp.is_unused(sp_id):
                specials.add(i)
                pieces[i] = b""
    return pieces, specials
