"""The client libraries people use, against `structgen serve`, on function-call schemas.

Each of N Glaive function schemas from maskbench-dev becomes a pydantic model
(`pydantic.create_model`), so what each client sends is pydantic's own schema: optional
fields as `anyOf [T, null]`, no `additionalProperties`. Every client asks the embedded
model, greedily, for one object of each model, from this checkout's server and from a
baseline revision's (a git worktree of it, served the same way), in one run. Reported
per client and server: the share of valid objects, the share cut off by max_tokens, the
share refused with a 400, and the rest (invalid objects, other errors).

    python benchmarks/clients.py [--schemas 20] [--baseline d6ee80b] [--clients a,b]
    structgen bench clients
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Literal, Optional

from pydantic import BaseModel, ValidationError, create_model

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.serve import Server  # noqa: E402

MASKBENCH = ROOT.parent / "shared" / "data" / "maskbench-dev"
OUTCOMES = ("valid", "cut", "refused", "invalid", "error")
SCALARS = {"string": str, "integer": int, "number": float, "boolean": bool}
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of LiteLLM's price list


# -- the schemas, as pydantic models ------------------------------------------------------


def _python_type(schema: dict) -> Any | None:
    """The annotation for a flat JSON Schema property, or None when it has no plain one."""
    if "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
        return Literal[tuple(schema["enum"])]
    kind = schema.get("type")
    if kind in SCALARS:
        return SCALARS[kind]
    if kind == "array" and isinstance(schema.get("items"), dict):
        item = _python_type(schema["items"])
        return list[item] if item is not None else None
    return None


def pydantic_model(name: str, schema: dict) -> type[BaseModel] | None:
    """The model a pydantic user would write for a function's parameters, if it is flat."""
    properties = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(properties, dict) or not properties:
        return None
    required = set(schema.get("required", []))
    fields: dict[str, Any] = {}
    for prop, sub in properties.items():
        annotation = _python_type(sub) if isinstance(sub, dict) else None
        if annotation is None or not prop.isidentifier() or prop.startswith("_"):
            return None
        fields[prop] = (annotation, ...) if prop in required else (Optional[annotation], None)
    class_name = "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", name) if part)
    return create_model(class_name or "Arguments", **fields)


def function_models(count: int) -> list[tuple[str, type[BaseModel]]]:
    """(function name, model) of the first `count` Glaive schemas that are flat."""
    found = []
    for path in sorted(MASKBENCH.glob("Glaiveai2K---*.json")):
        name = path.stem.split("---", 1)[1].rsplit("_", 1)[0]
        model = pydantic_model(name, json.loads(path.read_text())["schema"])
        if model is not None:
            found.append((name, model))
        if len(found) == count:
            break
    return found


# -- the clients: each asks once and says how it went ----------------------------------------


def _openai_parse(base_url: str, model_name: str, prompt: str, model: type[BaseModel], max_tokens: int) -> str:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    try:
        completion = client.chat.completions.parse(model=model_name, messages=[{"role": "user", "content": prompt}],
                                                   response_format=model, max_tokens=max_tokens, temperature=0.0)
    except openai.LengthFinishReasonError:
        return "cut"
    except openai.BadRequestError:
        return "refused"
    return "valid" if isinstance(completion.choices[0].message.parsed, model) else "invalid"


def _instructor(mode_name: str) -> Callable:
    def ask(base_url, model_name, prompt, model, max_tokens) -> str:
        import instructor
        import openai
        from instructor.core.exceptions import IncompleteOutputException, InstructorRetryException

        client = instructor.from_openai(openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0),
                                        mode=getattr(instructor.Mode, mode_name))
        try:
            client.chat.completions.create(model=model_name, messages=[{"role": "user", "content": prompt}],
                                           response_model=model, max_tokens=max_tokens, temperature=0.0,
                                           max_retries=0)
        except IncompleteOutputException:
            return "cut"
        except InstructorRetryException as err:
            return "refused" if isinstance(err.__cause__, openai.BadRequestError) else "invalid"
        return "valid"
    return ask


def _langchain(method: str) -> Callable:
    def ask(base_url, model_name, prompt, model, max_tokens) -> str:
        import openai
        from langchain_openai import ChatOpenAI

        chat = ChatOpenAI(base_url=base_url, api_key="unused", model=model_name, temperature=0.0,
                          max_tokens=max_tokens, max_retries=0)
        try:
            result = chat.with_structured_output(model, method=method, include_raw=True).invoke(prompt)
        except openai.LengthFinishReasonError:
            return "cut"
        except openai.BadRequestError:
            return "refused"
        if isinstance(result["parsed"], model):
            return "valid"
        return "cut" if result["raw"].response_metadata.get("finish_reason") == "length" else "invalid"
    return ask


def _pydantic_ai(native: bool) -> Callable:
    def ask(base_url, model_name, prompt, model, max_tokens) -> str:
        from pydantic_ai import Agent, NativeOutput, capture_run_messages
        from pydantic_ai.exceptions import IncompleteToolCall, ModelHTTPError, UnexpectedModelBehavior
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider
        from pydantic_ai.settings import ModelSettings

        chat = OpenAIChatModel(model_name, provider=OpenAIProvider(base_url=base_url, api_key="unused"))
        agent = Agent(chat, output_type=NativeOutput(model) if native else model, retries=0,
                      model_settings=ModelSettings(max_tokens=max_tokens, temperature=0.0))
        with capture_run_messages() as messages:
            try:
                result = agent.run_sync(prompt)
            except IncompleteToolCall:
                return "cut"
            except ModelHTTPError as err:
                return "refused" if err.status_code == 400 else "error"
            except UnexpectedModelBehavior:  # native output: a cut-off reply and an invalid one alike
                return "cut" if getattr(messages[-1], "finish_reason", None) == "length" else "invalid"
        return "valid" if isinstance(result.output, model) else "invalid"
    return ask


def _litellm(base_url, model_name, prompt, model, max_tokens) -> str:
    import litellm

    try:
        response = litellm.completion(model="openai/" + model_name, api_base=base_url, api_key="unused",
                                      messages=[{"role": "user", "content": prompt}], response_format=model,
                                      max_tokens=max_tokens, temperature=0.0, num_retries=0)
    except litellm.BadRequestError:
        return "refused"
    choice = response.choices[0]
    if choice.finish_reason == "length":
        return "cut"
    try:
        model.model_validate_json(choice.message.content)
    except ValidationError:
        return "invalid"
    return "valid"


CLIENTS: dict[str, Callable] = {
    "openai.parse": _openai_parse,
    "instructor.TOOLS": _instructor("TOOLS"),
    "instructor.JSON_SCHEMA": _instructor("JSON_SCHEMA"),
    "langchain.json_schema": _langchain("json_schema"),
    "langchain.function_calling": _langchain("function_calling"),
    "pydantic-ai.tool": _pydantic_ai(native=False),
    "pydantic-ai.native": _pydantic_ai(native=True),
    "litellm": _litellm,
}


def prompt_for(function: str) -> str:
    return f"Call {function.replace('_', ' ')} with realistic arguments."


# -- running ---------------------------------------------------------------------------------


def run_clients(base_url: str, clients: list[str], models, max_tokens: int) -> dict[str, Counter]:
    import httpx

    model_name = httpx.get(base_url + "/models").json()["data"][0]["id"]
    counts: dict[str, Counter] = {}
    for client in clients:
        counts[client] = Counter()
        started = time.monotonic()
        for function, model in models:
            try:
                outcome = CLIENTS[client](base_url, model_name, prompt_for(function), model, max_tokens)
            except Exception as err:  # a client's own failure is a result, not a crash of the run
                print(f"  {client} on {function}: {type(err).__name__}: {str(err)[:160]}", file=sys.stderr)
                outcome = "error"
            counts[client][outcome] += 1
        print(f"  {client}: {dict(counts[client])} ({time.monotonic() - started:.0f} s)", flush=True)
    return counts


def baseline_tree(revision: str, folder: Path) -> Path:
    """A worktree of `revision` (detached), to serve the baseline from."""
    subprocess.run(["git", "worktree", "add", "--detach", "--force", str(folder), revision], cwd=ROOT,
                   check=True, capture_output=True)
    return folder


def serve_and_run(root: Path, label: str, clients, models, max_tokens: int, start_timeout_s: float):
    args = argparse.Namespace(url=None, server_args="")
    print(f"\n## {label} ({root})", flush=True)
    with Server(args, root=root, start_timeout_s=start_timeout_s) as server:
        return run_clients(server.url + "/v1", clients, models, max_tokens)


def table(results: dict[str, dict[str, Counter]], total: int) -> str:
    lines = ["| client | server | valid | cut by max_tokens | refused | other |", "|---|---|---:|---:|---:|---:|"]
    for client in next(iter(results.values())):
        for label, counts in results.items():
            c = counts[client]
            share = {k: f"{100 * c[k] / total:.0f}%" for k in OUTCOMES}
            other = 100 * (c["invalid"] + c["error"]) / total
            lines.append(f"| {client} | {label} | {share['valid']} | {share['cut']} | {share['refused']} | {other:.0f}% |")
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schemas", type=int, default=20, help="Glaive function schemas to ask for")
    parser.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated, from: " + ", ".join(CLIENTS))
    parser.add_argument("--max-tokens", type=int, default=150)
    parser.add_argument("--baseline", default="d6ee80b",
                        help="revision served as the baseline, in the same run ('' for none)")
    parser.add_argument("--start-timeout", type=float, default=1200.0,
                        help="seconds a server may take to listen (a fresh tree builds its kernels first)")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "results" / "clients.json")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    clients = [c for c in args.clients.split(",") if c]
    unknown = [c for c in clients if c not in CLIENTS]
    if unknown:
        raise SystemExit(f"unknown clients: {', '.join(unknown)} (known: {', '.join(CLIENTS)})")
    models = function_models(args.schemas)
    print(f"{len(models)} Glaive function schemas as pydantic models, {len(clients)} clients, "
          f"greedy, max_tokens {args.max_tokens}")
    results: dict[str, dict[str, Counter]] = {}
    with tempfile.TemporaryDirectory(prefix="structgen-baseline-") as scratch:
        if args.baseline:
            tree = baseline_tree(args.baseline, Path(scratch) / "tree")
            try:
                results[args.baseline] = serve_and_run(tree, f"baseline {args.baseline}", clients, models,
                                                       args.max_tokens, args.start_timeout)
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
        results["this checkout"] = serve_and_run(ROOT, "this checkout", clients, models, args.max_tokens,
                                                 args.start_timeout)
    print("\n" + table(results, len(models)))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({
        "schemas": [name for name, _ in models], "max_tokens": args.max_tokens,
        "results": {label: {client: dict(c) for client, c in counts.items()} for label, counts in results.items()},
    }, indent=2) + "\n")
    print(f"\nwrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
