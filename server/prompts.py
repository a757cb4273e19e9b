"""Prompt token ids from a request: chat messages through the model's chat template
(tools described in a system message when the template ignores them), or a completion
prompt given as text, token ids, or a list of either. Owns prompt building only."""

from __future__ import annotations

from server.errors import APIError
from server.protocol import ChatCompletionRequest
from server.tool_calls import tools_prompt
from structgen.chat import render_chat


def chat_prompt_ids(tok, body: ChatCompletionRequest) -> list[int]:
    messages = []
    for m in body.messages:
        content = m.content
        if isinstance(content, list):  # content parts: text only
            texts = [p.get("text", "") for p in content if p.get("type") == "text"]
            if len(texts) != len(content):
                raise APIError(400, "only text content parts are supported", param="messages")
            content = "".join(texts)
        role = "system" if m.role == "developer" else m.role
        messages.append({"role": role, "content": content or ""})
    tools = [t.model_dump() for t in body.tools] if body.tools else None
    text = _render(tok, messages, tools)
    if tools and body.tool_choice != "none" and not all(t.function.name in text for t in body.tools):
        # the template ignores tools (SmolLM2's does): describe them in a system message
        described = tools_prompt(body.tools, body.tool_choice, body.parallel_tool_calls is not False)
        if messages and messages[0]["role"] == "system":
            messages[0] = {"role": "system", "content": messages[0]["content"] + "\n\n" + described}
        else:
            messages.insert(0, {"role": "system", "content": described})
        text = _render(tok, messages, tools)
    return tok.encode(text, add_special_tokens=False)


def completion_prompts(tok, prompt) -> list[list[int]]:
    if isinstance(prompt, str):
        return [tok.encode(prompt, add_special_tokens=False)]
    if prompt and all(isinstance(p, int) for p in prompt):
        return [list(prompt)]
    out = []
    for p in prompt:
        out.append(tok.encode(p, add_special_tokens=False) if isinstance(p, str) else list(p))
    if not out:
        raise APIError(400, "prompt is empty", param="prompt")
    return out


def _render(tok, messages: list[dict], tools) -> str:
    try:
        return tok.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    except Exception:  # a template that refuses these roles or tools: plain ChatML
        return render_chat(tok, messages[-1]["content"], None) if len(messages) == 1 else _chatml(messages)


def _chatml(messages: list[dict]) -> str:
    body = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return body + "<|im_start|>assistant\n"
