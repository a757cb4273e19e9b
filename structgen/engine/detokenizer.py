"""Incremental detokenization of one sequence: token ids in, safe-to-stream text out.

This module owns turning a sequence's generated token ids into its output text: exact
token bytes decoded incrementally as UTF-8, special tokens skipped, stop strings found
(also across token boundaries) and cut, and the text held back that a client must not
see yet. It reads a `Vocabulary` and the request's `SamplingParams`; it must not touch
the tokenizer's own decode (which is lossy for byte tokens), the sampler or the engine.

Text moves through three stages:

* bytes of an incomplete UTF-8 character wait inside the incremental decoder (at
  `finish` they become U+FFFD; bytes that can never be valid become U+FFFD at once);
* decoded text that could still be the start of a stop string is *held* (always
  shorter than the longest stop string);
* everything before that is *committed*: final, and handed out by `take_new_text`.

A stop string matches at the first point of the character stream where any stop string
is complete (earliest end; on a tie, the longer one), so the result does not depend on
how the tokens were split into `append` calls.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping, Sequence

from structgen.engine.sampling_params import SamplingParams
from structgen.vocab import Vocabulary

__all__ = ["IncrementalDetokenizer"]


class IncrementalDetokenizer:
    """Per-sequence detokenizer state; not thread-safe (one engine thread owns it).

    `special_token_text`: the text of special tokens (id -> e.g. "<|im_start|>"), used
    only when `params.skip_special_tokens` is False; a `Vocabulary` stores no text for
    special tokens, so without it they contribute nothing either way. EOS never does.
    """

    def __init__(
        self,
        vocab: Vocabulary,
        params: SamplingParams,
        special_token_text: Mapping[int, str] | None = None,
    ):
        self._vocab = vocab
        self._stops = tuple(dict.fromkeys(params.stop))
        self._include_stop = params.include_stop_str_in_output
        self._special_text = {} if params.skip_special_tokens else dict(special_token_text or {})
        for eos in vocab.eos_token_ids:
            self._special_text.pop(eos, None)
        self._stop_prefixes = frozenset(s[:n] for s in self._stops for n in range(1, len(s)))
        self._longest_stop = max(map(len, self._stops), default=0)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._committed: list[str] = []
        self._untaken: list[str] = []
        self._held = ""
        self._stop_matched: str | None = None
        self._finished = False

    # ----------------------------------------------------------------- public

    @property
    def stop_matched(self) -> str | None:
        """The stop string that ended the text, or None."""
        return self._stop_matched

    @property
    def done(self) -> bool:
        """True once a stop string matched or `finish` was called: no more text is taken."""
        return self._stop_matched is not None or self._finished

    @property
    def text(self) -> str:
        """The output text so far, truncated at a stop string (kept iff
        include_stop_str_in_output). Until `finish` or a stop, it includes the held-back
        tail, which a later stop string may still cut. Costs O(length): stream with
        `take_new_text` instead."""
        if len(self._committed) > 1:
            self._committed = ["".join(self._committed)]
        committed = self._committed[0] if self._committed else ""
        return committed + self._held

    def append(self, token_ids: Sequence[int]) -> str | None:
        """Add generated tokens. Returns the stop string if one completed in them (the text
        is cut there and later tokens are ignored), else None."""
        if self.done:
            return None
        new_text = self._decoder.decode(self._token_bytes(token_ids))
        return self._add_text(new_text)

    def append_bytes(self, data: bytes) -> str | None:
        """Add output bytes that are not (yet) whole tokens of their own: a jump-forward's
        forced span, whose tokens replaced tokens already appended. Same result as
        `append`."""
        if self.done:
            return None
        return self._add_text(self._decoder.decode(data))

    def take_new_text(self) -> str:
        """Text committed since the last call: never part of a character, never text that
        may still turn out to start a stop string."""
        delta = "".join(self._untaken)
        self._untaken.clear()
        return delta

    def finish(self) -> str:
        """End of the sequence (length, EOS, cancel): release the held-back text and any
        incomplete character (as U+FFFD); returns the last delta. Idempotent."""
        if not self.done:
            self._add_text(self._decoder.decode(b"", final=True))
            if self._stop_matched is None:
                self._commit(self._held)
                self._held = ""
            self._finished = True
        return self.take_new_text()

    # ----------------------------------------------------------------- internals

    def _token_bytes(self, token_ids: Sequence[int]) -> bytes:
        if not self._special_text:
            return self._vocab.decode(token_ids)  # special and EOS ids are b"" there
        pieces = []
        for token in token_ids:
            text = self._special_text.get(token)
            pieces.append(text.encode() if text is not None else self._vocab.decode((token,)))
        return b"".join(pieces)

    def _add_text(self, new_text: str) -> str | None:
        if not new_text:
            return None
        if not self._stops:
            self._commit(new_text)
            return None
        # Any stop string completed by new_text starts inside the held tail: everything
        # before the tail was already known not to begin one.
        window = self._held + new_text
        match = self._earliest_stop(window)
        if match is not None:
            start, stop = match
            end = start + len(stop) if self._include_stop else start
            self._commit(window[:end])
            self._held = ""
            self._stop_matched = stop
            return stop
        hold_from = self._start_of_possible_stop(window)
        self._commit(window[:hold_from])
        self._held = window[hold_from:]
        return None

    def _earliest_stop(self, window: str) -> tuple[int, str] | None:
        """(start, stop) of the match that ends first; on equal ends the one starting first."""
        best: tuple[int, int, str] | None = None
        for stop in self._stops:
            start = window.find(stop)
            if start < 0:
                continue
            candidate = (start + len(stop), start, stop)
            if best is None or candidate < best:
                best = candidate
        return None if best is None else (best[1], best[2])

    def _start_of_possible_stop(self, window: str) -> int:
        """The first index whose suffix is a proper prefix of a stop string, else len(window)."""
        first = max(0, len(window) - self._longest_stop + 1)
        for start in range(first, len(window)):
            if window[start:] in self._stop_prefixes:
                return start
        return len(window)

    def _commit(self, text: str) -> None:
        if text:
            self._committed.append(text)
            self._untaken.append(text)
