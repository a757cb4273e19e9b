"""Chat prompts: messages rendered with the tokenizer's chat template.

Owns only text rendering; tokenization and generation happen elsewhere.
"""

from __future__ import annotations

from typing import Any


def render_chat(tok: Any, prompt: str, system: str | None = None) -> str:
    """The prompt as the model's chat template renders it, ready for the assistant's reply."""
    messages = [{"role": "user", "content": prompt}]
    if system:
        messages.insert(0, {"role": "system", "content": system})
    if getattr(tok, "chat_template", None):
        return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    # No template: ChatML, which SmolLM2-Instruct uses.
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + "<|im_start|>assistant\n"
