"""Jump-forward: turn the bytes a grammar forces into canonical tokens to append at once.

When a matcher says every continuation starts with some bytes (`{"name": "` after `{`),
those bytes need not be decoded one token at a time: the engine appends their tokens and
runs them as one prefill chunk. The tokens must be the ones the tokenizer itself would
produce, or the model sees text split in a way it never saw in training. So the span is
tokenized together with the last few generated tokens (whose ids may change: those are
rolled back), and trailing tokens that a longer vocabulary token could still extend are
left for the model to decode (the grammar keeps forcing their bytes).

This module only plans a jump from ids and bytes; the engine applies it (request tokens,
KV cache, matcher, detokenizer). It never touches tensors or the scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from structgen.vocab import Vocabulary

RETOKENIZED_TAIL = 2  # generated tokens re-tokenized together with the forced span


@dataclass(frozen=True)
class Jump:
    rollback: int  # trailing generated tokens to remove
    append: list[int]  # tokens to add after the rollback (they spell removed bytes + forced bytes)
    new_bytes: bytes  # the forced bytes that `append` covers beyond the removed tokens


def extendable_tokens(vocab: Vocabulary) -> frozenset[int]:
    """Ids whose bytes are a proper prefix of another token's bytes (cached per vocabulary):
    a longer token could still swallow them once more text follows."""

    def build(v: Vocabulary) -> frozenset[int]:
        order = sorted((b, i) for i, b in enumerate(v.token_bytes) if b)
        found = set()
        for (data, token), (following, _) in zip(order, order[1:]):
            if following.startswith(data) and following != data:
                found.add(token)
        return frozenset(found)

    return vocab.derived("jump_forward.extendable", build)


def plan_jump(tail: Sequence[int], forced: bytes, vocab: Vocabulary, tokenizer: Any,
              max_new_tokens: int) -> Jump | None:
    """How to append `forced` after the generated `tail` tokens, or None when no token
    can be gained canonically. `max_new_tokens` caps the net number of tokens added."""
    tail = list(tail)
    tail_bytes = vocab.decode(tail)
    text_bytes = tail_bytes + forced
    try:
        text = text_bytes.decode("utf-8")
    except UnicodeDecodeError:
        return None  # a character split at either end: let the model decode it
    ids = tokenizer.encode(text, add_special_tokens=False)
    if vocab.decode(ids) != text_bytes:
        return None  # the tokenizer does not round-trip this text exactly
    if ids and ids[-1] in extendable_tokens(vocab):
        ids.pop()
    common = 0
    while common < min(len(ids), len(tail)) and ids[common] == tail[common]:
        common += 1
    rollback = len(tail) - common
    append = ids[common:][: rollback + max_new_tokens]
    if len(append) <= rollback:
        return None
    removed = vocab.decode(tail[common:])
    covered = vocab.decode(append)
    if not covered.startswith(removed):
        return None
    return Jump(rollback, append, covered[len(removed):])
