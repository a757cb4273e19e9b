"""Shared pytest fixtures: the real tokenizers and their vocabularies (session-scoped).

`smollm2_*`: the default model's tokenizer (SmolLM2-135M-Instruct GGUF, 49,152 tokens).
`deepseek_*`: the ~128k-token DeepSeek tokenizer (129,280 ids with added tokens).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

from structgen.grammar.nesting import make_room_for_deep_input

# structgen raises the recursion limit at its first compile; raised here already, it is
# the same before and after every test (hypothesis warns when a test changes it)
make_room_for_deep_input()


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    from structgen.default_model import load_default_tokenizer

    return load_default_tokenizer()


@pytest.fixture(scope="session")
def smollm2_vocab(smollm2_tokenizer):
    from structgen.vocab import Vocabulary

    return Vocabulary.default()


@pytest.fixture(scope="session")
def deepseek_tokenizer():
    from structgen.default_model import load_deepseek_tokenizer

    return load_deepseek_tokenizer()


@pytest.fixture(scope="session")
def deepseek_vocab(deepseek_tokenizer):
    from structgen.vocab import Vocabulary

    return Vocabulary.from_tokenizer(deepseek_tokenizer, name="deepseek")
