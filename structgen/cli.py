"""The `structgen` command line.

    structgen generate [--schema JSON_OR_FILE | --regex R | --choice A B ...] PROMPT
    structgen compile  [--regex | --choice] SOURCE ...
    structgen serve    [--port 8000] [--model PATH]  (OpenAI-compatible server)
    structgen bench    SUITE [--quick] ...            (benchmarks; from a source checkout)

`generate` runs the default model (SmolLM2-135M-Instruct, offline) on the structgen
engine, every token masked by the compiled grammar; `compile` compiles a grammar for the
default model's vocabulary and reports what the compiler did. User errors (a bad schema,
an unsupported keyword, a regex that does not compile) print one clear message to
stderr and exit with status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from structgen import __version__
from structgen.compile_workers import DEFAULT_WORKERS
from structgen.errors import StructgenError

EXIT_OK = 0
EXIT_FAILED = 1  # generation ended incomplete or invalid; environment problems
EXIT_USAGE = 2  # bad input: schema, regex, choices, arguments

WHITESPACE_MODES = ("default", "compact", "flexible")



class UsageError(Exception):
    """Bad command-line input detected by the CLI itself (exit status 2)."""


# --------------------------------------------------------------------------- parsing


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="structgen",
        description="Structured generation for LLMs: JSON Schema, regex and choice constrained decoding.",
    )
    parser.add_argument("--version", action="version", version=f"structgen {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    gen = sub.add_parser(
        "generate",
        help="generate text with the default model under a grammar",
        description=(
            "Generate a reply to PROMPT with the default model (SmolLM2-135M-Instruct, "
            "offline, CPU) constrained by a JSON Schema, a regex or a list of choices "
            "(none: unconstrained). The text goes to stdout; progress and the validation "
            "result go to stderr. Exit status: 0 complete (and valid, with --schema), "
            "1 cut off at --max-tokens or invalid, 2 bad input."
        ),
    )
    what = gen.add_mutually_exclusive_group()
    what.add_argument(
        "--schema",
        metavar="JSON_OR_FILE",
        help="JSON Schema as JSON text, a file path, or - for stdin; the schema is also "
        "shown to the model in the system message",
    )
    what.add_argument("--regex", metavar="R", help="regular expression the whole output must match")
    what.add_argument(
        "--choice",
        metavar="TEXT",
        nargs="+",
        action="extend",
        help="the output is exactly one of these strings (if PROMPT is not given "
        "elsewhere, the last word after --choice is taken as the prompt)",
    )
    gen.add_argument("prompt", metavar="PROMPT", nargs="?", help="the user message")
    gen.add_argument("--max-tokens", type=_positive_int, default=256, metavar="N",
                     help="maximum new tokens (default: 256)")
    gen.add_argument("--temperature", type=_non_negative_float, default=0.0, metavar="T",
                     help="sampling temperature; 0 is greedy (default: 0)")
    gen.add_argument("--seed", type=int, default=None, help="random seed for sampling")
    gen.add_argument("--whitespace", choices=WHITESPACE_MODES, default="default",
                     help="JSON whitespace (with --schema): default = json.dumps separators, "
                     "compact = none, flexible = any JSON whitespace, bounded per run")
    gen.add_argument("--system", metavar="TEXT", default=None,
                     help="system message (default: the model's own, or the schema with --schema)")
    gen.add_argument("-q", "--quiet", action="store_true", help="no progress bar or timing line on stderr (the validation result is still shown)")
    gen.set_defaults(func=_cmd_generate)

    comp = sub.add_parser(
        "compile",
        help="compile a grammar for the default vocabulary and report on it",
        description=(
            "Compile a JSON Schema (default), a lark or GBNF grammar (a .lark/.gbnf file, "
            "or --syntax), a regex (--regex) or a list of choices (--choice) for the default "
            "model's vocabulary (SmolLM2, 49,152 tokens) and print the compile time, the "
            "state count, how many tokens the first mask allows and the forced prefix. "
            "--sample TEXT checks a sentence token by token (SmolLM2's tokenization) and "
            "says where it leaves the language. Bad input, or a sample that does not "
            "pass, exits with status 2."
        ),
    )
    kind = comp.add_mutually_exclusive_group()
    kind.add_argument("--regex", action="store_true", help="SOURCE is a regular expression")
    kind.add_argument("--choice", action="store_true", help="the SOURCEs are the choices")
    kind.add_argument("--syntax", choices=("lark", "gbnf"), default=None,
                      help="SOURCE is a context-free grammar in this syntax (implied by a .lark or .gbnf file)")
    comp.add_argument(
        "source",
        metavar="SOURCE",
        nargs="+",
        help="a JSON Schema (JSON text, a file path, or - for stdin); a grammar file (or text "
        "with --syntax); a regex with --regex; one or more strings with --choice",
    )
    comp.add_argument("--sample", metavar="TEXT", action="append", default=[],
                      help="a sentence that must be in the language (repeatable)")
    comp.add_argument("--whitespace", choices=WHITESPACE_MODES, default="default",
                      help="JSON whitespace mode for a schema (default: default)")
    comp.add_argument("--json", action="store_true", dest="as_json",
                      help="print the report as one JSON object")
    comp.set_defaults(func=_cmd_compile)

    serve = sub.add_parser("serve", help="run the OpenAI-compatible server",
                           description="Serve /v1/chat/completions, /v1/completions, /v1/models, "
                           "/health and /metrics on the engine. On 2 cores the default model listens "
                           "after ~24 s the first time (its GGUF file is converted once and cached) and "
                           "~6 s later, and answers its first request in under 1 s; each start-up phase "
                           "is printed with its duration (structgen bench startup measures them).")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--model", default=None,
                       help="folder with config.json + safetensors, or a .gguf file "
                       "(default: the embedded SmolLM2-135M-Instruct)")
    serve.add_argument("--served-model-name", default=None)
    serve.add_argument("--api-key", default=os.environ.get("STRUCTGEN_API_KEY"),
                       help="require 'Authorization: Bearer KEY' (default: $STRUCTGEN_API_KEY)")
    serve.add_argument("--kv-cache-bytes", type=_positive_int, default=None)
    serve.add_argument("--quantization", default=None, metavar="{auto,native,int8,int4,fp8,float}",
                       help="native (a GGUF file's 4- and 8-bit layers run as stored, on CPU), int8 (one "
                       "scale per output channel), int4 (a scale and zero per group of input columns), "
                       "fp8 (GPUs of compute capability 8.9 and up), float (unquantized) or auto "
                       "(default: native for the embedded model on CPU, where it decodes ~1.9x faster "
                       "than float with the same perplexity; float for --model and on GPU)")
    serve.add_argument("--quantization-group-size", type=_positive_int, default=None,
                       help="int4: input columns per scale and zero: 32, 64, 128 or 256 (default: 32)")
    serve.add_argument("--kv-cache-dtype", default=None, metavar="{float16,bfloat16,float32,int8,fp8}",
                       help="the KV cache's dtype (default: float16 under native quantization on CPU, else the "
                            "model's); float16 halves its memory per token, int8 and fp8 (one byte and a scale "
                            "per row; fp8 on a GPU needs compute capability 8.9) nearly halve it again")
    serve.add_argument("--max-num-seqs", type=_positive_int, default=None)
    serve.add_argument("--max-waiting", type=_positive_int, default=512,
                       help="requests queued beyond the running batch before 429s")
    serve.add_argument("--max-body-bytes", type=_positive_int, default=4 << 20)
    serve.add_argument("--no-jump-forward", action="store_true")
    serve.add_argument("--stream-interval", type=_positive_int, default=1, metavar="TOKENS",
                       help="tokens a streamed chunk holds, after the first chunk, which goes out at once "
                       "(default 1: each token as it comes); more send fewer, larger chunks, less work per "
                       "token for the HTTP stack and, under --replicas, for Ray")
    serve.add_argument("--allow-additional-properties", action="store_true",
                       help="follow JSON Schema's default: an object schema that is silent on "
                       "additionalProperties may get undeclared properties (by default it gets none; "
                       "a request's structured_outputs.disable_additional_properties overrides either)")
    serve.add_argument("--grammar-cache-bytes", type=_nonnegative_int, default=None,
                       help="memory budget of the compiled-grammar cache; the least recently used "
                       "grammars are evicted past it (default: an eighth of the machine's memory, "
                       "at most 4 GiB)")
    serve.add_argument("--compile-workers", type=_nonnegative_int, default=DEFAULT_WORKERS,
                       help="processes that compile grammars beside the engine, so that a large "
                       f"compile never stalls other streams (default: {DEFAULT_WORKERS}; 0: compile "
                       "in the server's own process)")
    scale = serve.add_argument_group("scale-out on Ray Serve (docs/scale-out.md)")
    scale.add_argument("--replicas", type=_positive_int, default=None,
                       help="serve N engine replicas behind one endpoint, on a local Ray cluster bound "
                       "to loopback; requests with a grammar go to the replica that compiled it")
    scale.add_argument("--ray-address", default=None,
                       help="join this Ray cluster (e.g. ray://head:10001 or auto) instead of starting one")
    scale.add_argument("--replica-cpus", type=_non_negative_float, default=None,
                       help="CPUs Ray reserves for each replica (default: 1)")
    scale.add_argument("--replica-gpus", type=_non_negative_float, default=None,
                       help="GPUs Ray reserves for each replica (default: 0)")
    scale.add_argument("--min-replicas", type=_nonnegative_int, default=None,
                       help="autoscale between --min-replicas and --max-replicas")
    scale.add_argument("--max-replicas", type=_positive_int, default=None)
    scale.add_argument("--target-ongoing-requests", type=_positive_int, default=None,
                       help="autoscaling: ongoing requests per replica to aim at (default: 16)")
    scale.add_argument("--router", choices=("grammar", "power_of_two"), default=None,
                       help="grammar (default): a request goes to the replica that holds its grammar "
                       "(or its prompt's prefix) warm; power_of_two: Ray Serve's default, by load only")
    scale.add_argument("--drain-seconds", type=_non_negative_float, default=None,
                       help="on SIGTERM or Ctrl-C, how long in-flight requests may finish while new ones "
                       "get a 503, with or without --replicas (default: 30)")
    serve.set_defaults(func=_cmd_serve)

    bench = sub.add_parser("bench", add_help=False, help="run the benchmarks (masks, cfg, engine, "
                           "engine-gpu, constrained, serve, all); `structgen bench --help` for more")
    bench.set_defaults(func=_cmd_bench)  # its options are parsed by benchmarks/suites.py (see main)
    return parser


def _int_at_least(minimum: int):
    """An argparse type: an integer of at least `minimum`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}")
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse


_positive_int = _int_at_least(1)
_nonnegative_int = _int_at_least(0)


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}")
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def read_schema(arg: str) -> Any:
    """A schema from JSON text, a file path, or '-' (stdin). Raises UsageError."""
    if arg == "-":
        text, origin = sys.stdin.read(), "stdin"
    else:
        path = None
        try:
            if Path(arg).is_file():
                path = Path(arg)
        except (OSError, ValueError):  # e.g. a long JSON text is not a valid file name
            pass
        if path is not None:
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise UsageError(f"cannot read schema file {arg}: {e}")
            origin = str(path)
        else:
            stripped = arg.lstrip()
            if not stripped.startswith(("{", "[")) and stripped not in ("true", "false"):
                raise UsageError(f"schema {arg!r} is neither an existing file nor JSON text")
            text, origin = arg, "the schema argument"
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(
            f"{origin} is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})"
        )


def _compile(kind: str, source: Any, vocab: Any, whitespace: str, generating: bool = False) -> Any:
    """generating: for output, with the server's defaults (no undeclared properties where
    an object schema is silent on additionalProperties, integers within I-JSON's range);
    `compile` keeps JSON Schema's own semantics, to check texts against the schema."""
    import structgen

    if kind == "json_schema":
        return structgen.compile_json_schema(source, vocab, whitespace=whitespace,
                                             disable_additional_properties=generating, safe_integers=generating)
    if kind == "regex":
        return structgen.compile_regex(source, vocab)
    if kind == "choice":
        return structgen.compile_choice(list(source), vocab)
    if kind in ("lark", "gbnf"):
        text, syntax = source
        return structgen.compile_grammar(text, vocab, syntax=syntax)
    raise AssertionError(kind)


def _default_vocabulary() -> Any:
    from structgen.vocab import Vocabulary

    return Vocabulary.default()


# --------------------------------------------------------------------------- commands


def _cmd_compile(args: argparse.Namespace) -> int:
    if args.choice:
        kind, source = "choice", list(args.source)
    else:
        if len(args.source) != 1:
            raise UsageError(
                f"expected one {'regex' if args.regex else 'schema'}, got {len(args.source)} "
                "arguments (quote it, or use --choice for a list)"
            )
        syntax = args.syntax or _grammar_file_syntax(args.source[0])
        if args.regex:
            kind, source = "regex", args.source[0]
        elif syntax is not None:
            kind, source = syntax, (_read_text(args.source[0], "grammar"), syntax)
        else:
            kind, source = "json_schema", read_schema(args.source[0])

    t0 = time.perf_counter()
    vocab = _default_vocabulary()
    vocab_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    grammar = _compile(kind, source, vocab, args.whitespace)
    compile_s = time.perf_counter() - t0

    import structgen

    matcher = grammar.matcher()
    mask = structgen.allocate_bitmask(1, vocab.vocab_size)
    t0 = time.perf_counter()
    matcher.fill_bitmask(mask, 0)
    mask_s = time.perf_counter() - t0
    import numpy as np

    allowed = int(np.unpackbits(mask[0].view(np.uint8), bitorder="little")[: vocab.vocab_size].sum())
    forced = matcher.forced_bytes()
    example = grammar.example()
    stats = grammar.stats
    dfa = getattr(grammar, "dfa", None)
    report = {
        "kind": kind,
        "vocabulary": vocab.name,
        "vocab_size": vocab.vocab_size,
        "compile_s": stats.get("compile_s", compile_s),
        "ir_positions": stats.get("ir_size"),
        "dfa_states": getattr(dfa, "num_states", None),
        "first_mask_allowed": allowed,
        "first_mask_s": mask_s,
        "forced_prefix": forced.decode("utf-8", errors="replace"),
        "example": example.decode("utf-8", errors="replace"),
        "example_complete": grammar.accepts_bytes(example),
        "vocabulary_load_s": vocab_s,
    }
    samples = [_check_sample(grammar, text) for text in args.sample]
    if samples:
        report["samples"] = samples
    status = EXIT_OK if all(s["accepted"] for s in samples) else EXIT_USAGE
    if args.as_json:
        print(json.dumps(report, ensure_ascii=False))
        return status
    print(f"kind:           {kind}")
    print(f"vocabulary:     {vocab.name} ({vocab.vocab_size} tokens, loaded in {vocab_s:.2f} s)")
    print(f"compile time:   {report['compile_s'] * 1e3:.2f} ms")
    print(f"IR positions:   {report['ir_positions']} (upper bound of the lazily built NFA)")
    print(f"DFA states:     {report['dfa_states']} (built so far, lazily)")
    print(f"first mask:     {allowed} of {vocab.vocab_size} tokens allowed ({mask_s * 1e3:.2f} ms)")
    print(f"forced prefix:  {_show_bytes(forced)}")
    shown = _show_bytes(example[:400]) + (" ..." if len(example) > 400 else "")
    print(f"example:        {shown}{'' if report['example_complete'] else ' (a prefix: the example stopped early)'}")
    for sample in samples:
        verdict = (f"accepted, {sample['forced_share']:.0%} of its bytes forced" if sample["accepted"]
                   else f"REJECTED: {sample['reason']}")
        print(f"sample {sample['text']!r}: {verdict}")
    return status


def _grammar_file_syntax(arg: str) -> str | None:
    suffix = Path(arg).suffix.lower()
    return {".lark": "lark", ".gbnf": "gbnf"}.get(suffix)


def _read_text(arg: str, what: str) -> str:
    """A file's text, stdin for '-', or the argument itself when it is not a file."""
    if arg == "-":
        return sys.stdin.read()
    try:
        if Path(arg).is_file():
            return Path(arg).read_text(encoding="utf-8")
    except (OSError, ValueError):
        pass
    except UnicodeDecodeError as e:
        raise UsageError(f"cannot read {what} file {arg}: {e}")
    if _grammar_file_syntax(arg) is not None:
        raise UsageError(f"{what} file {arg} does not exist")
    return arg


def _check_sample(grammar: Any, text: str) -> dict:
    """Drive `text`'s default-model tokens through a matcher: accepted, or where it stops."""
    from structgen.default_model import load_default_tokenizer

    tok = load_default_tokenizer()
    matcher = grammar.matcher()
    done = ""
    for tid in tok.encode(text, add_special_tokens=False):
        piece = tok.decode([tid])
        if not matcher.accept_token(tid):
            return {"text": text, "accepted": False, "reason": f"token {piece!r} refused after {done!r}"}
        done += piece
    if not matcher.is_accepting():
        return {"text": text, "accepted": False, "reason": "the text ends before the grammar is complete"}
    return {"text": text, "accepted": True, "forced_share": _forced_share(grammar, text.encode())}


def _forced_share(grammar: Any, data: bytes) -> float:
    """The share of the text's bytes the grammar forces (what jump-forward need not decode)."""
    matcher = grammar.matcher()
    forced = 0
    for i in range(len(data)):
        forced += bool(matcher.forced_bytes())
        matcher.accept_bytes(data[i : i + 1])
    return forced / len(data) if data else 0.0


def _show_bytes(data: bytes) -> str:
    try:
        return repr(data.decode("utf-8")) + f" ({len(data)} bytes)"
    except UnicodeDecodeError:
        return repr(data) + f" ({len(data)} bytes)"


def _cmd_generate(args: argparse.Namespace) -> int:
    prompt = args.prompt
    if prompt is None and args.choice and len(args.choice) >= 2:
        prompt = args.choice.pop()  # `--choice yes no "Is it?"`: the last word is the prompt
    if prompt is None:
        raise UsageError("missing PROMPT")

    schema = None
    system = args.system
    if args.schema is not None:
        schema = read_schema(args.schema)
        kind, source = "json_schema", schema
        if system is None:
            system = (
                "You reply with a single JSON value that follows this JSON Schema:\n"
                + json.dumps(schema, ensure_ascii=False)
            )
    elif args.regex is not None:
        kind, source = "regex", args.regex
    elif args.choice:
        kind, source = "choice", args.choice
    else:
        kind, source = None, None

    from tqdm import tqdm

    quiet = args.quiet
    bar = tqdm(total=4, desc="structgen: loading tokenizer", file=sys.stderr, leave=False,
               disable=quiet, bar_format="{desc:<40} {bar} {n_fmt}/{total_fmt} [{elapsed}]")
    try:
        bar.set_description_str("structgen: loading model")
        _quiet_transformers()
        from structgen.chat import render_chat
        from structgen.engine.config import EngineConfig
        from structgen.engine.engine import Engine
        from structgen.engine.sampling_params import SamplingParams

        engine = Engine(EngineConfig(kv_cache_bytes=64 << 20))
        bar.update(1)
        bar.set_description_str("structgen: compiling grammar")
        grammar = _compile(kind, source, engine.vocab, args.whitespace, generating=True) if kind else None
        bar.update(1)
        bar.set_description_str("structgen: generating")
        prompt_ids = engine.tokenizer.encode(
            render_chat(engine.tokenizer, prompt, system), add_special_tokens=False
        )
        params = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed)
        started = time.perf_counter()
        result = engine.generate([prompt_ids], params, grammars=[grammar])[0]
        seconds = time.perf_counter() - started
        bar.update(2)
    finally:
        bar.close()

    sys.stdout.write(result.text + "\n")
    sys.stdout.flush()

    def note(msg: str) -> None:
        if not quiet:
            print(msg, file=sys.stderr)

    num_tokens = len(result.token_ids)
    rate = num_tokens / seconds if seconds > 0 else 0.0
    note(f"structgen: {num_tokens} tokens in {seconds:.1f} s ({rate:.1f} tokens/s), "
         f"finish reason: {result.finish_reason}")
    status = EXIT_OK
    if result.finish_reason == "length":
        note(f"structgen: output incomplete: cut off at --max-tokens {args.max_tokens}")
        status = EXIT_FAILED
    if schema is not None:
        ok, message = validate_json(result.text, schema)
        print(f"structgen: schema validation: {message}", file=sys.stderr)
        if not ok:
            status = EXIT_FAILED
    return status


def validate_json(text: str, schema: Any) -> tuple[bool, str]:
    """(valid, message) for `text` against `schema`, with the `jsonschema` package
    (numbers read as exact decimals: `structgen.validation`)."""
    from structgen.validation import schema_error

    error = schema_error(text, schema)
    return (True, "valid") if error is None else (False, f"FAILED {error}")


def _quiet_transformers() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except Exception:
        pass


# How long an idle client connection stays open. Longer than the clients' own expiry
# (httpx and the openai client keep idle connections 5 s, uvicorn's default too: equal
# timers race, and a request sent on a connection the server is just closing fails with
# a read error) and than a load balancer's usual 60 s idle timeout.
KEEP_ALIVE_S = 65
# After the drain (server/drain.py), how long uvicorn lets the connections still open
# finish before it closes them: the drain has already waited for the requests.
CLOSE_AFTER_DRAIN_S = 1.0


def _serve_options(args: argparse.Namespace):
    from server.launch import ServeOptions

    return ServeOptions.from_mapping({**vars(args), "jump_forward": not args.no_jump_forward})


def _serve_replicated(args: argparse.Namespace) -> int:
    from server.ray_serve import environment

    environment.prepare(args.ray_address)  # before Ray is imported: Ray reads it then
    try:
        from server.ray_serve.cluster import ScaleOut, serve_replicated
    except ModuleNotFoundError as e:
        if e.name != "ray" and not (e.name or "").startswith("ray."):
            raise
        raise UsageError("--replicas and --ray-address need Ray Serve: pip install -e '.[scale]' in structgen's checkout") from None
    try:
        scale = ScaleOut.from_mapping(vars(args))
    except ValueError as e:
        raise UsageError(str(e)) from None
    return serve_replicated(_serve_options(args), scale, host=args.host, port=args.port)


def _cmd_serve(args: argparse.Namespace) -> int:
    if args.replicas is not None or args.ray_address is not None:
        return _serve_replicated(args)
    import uvicorn

    from server import launch
    from server.drain import DRAIN_SECONDS, Draining, DrainingServer

    _quiet_transformers()
    served = launch.start(_serve_options(args))
    print(f"structgen serve: {served.runner.engine.model_name} on http://{args.host}:{args.port}/v1",
          file=sys.stderr)
    app = Draining(served.app)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning",
                            timeout_keep_alive=KEEP_ALIVE_S, timeout_graceful_shutdown=CLOSE_AFTER_DRAIN_S)
    drain_seconds = DRAIN_SECONDS if args.drain_seconds is None else args.drain_seconds
    try:
        DrainingServer(config, app, drain_seconds).run()
    finally:
        served.stop()
    return EXIT_OK


def _cmd_bench(args: argparse.Namespace) -> int:
    """Hand over to benchmarks/suites.py, which lives beside the package in a source checkout."""
    checkout = Path(__file__).resolve().parent.parent
    if not (checkout / "benchmarks" / "suites.py").is_file():
        raise UsageError("the benchmarks live in structgen's source checkout (benchmarks/), which this "
                         "installation does not have: clone the repository and pip install -e '.[bench]'")
    if str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    from benchmarks.suites import main as bench_main

    return bench_main(args.bench_args)


# --------------------------------------------------------------------------- entry point


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # everything after `bench` belongs to the benchmark runner
        argv, bench_args = argv[:1], argv[1:]
    args, extra = parser.parse_known_args(argv)
    if args.command == "bench":
        args.bench_args = bench_args
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args.func(args) or 0)
    except (StructgenError, UsageError) as e:
        print(f"structgen {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except FileNotFoundError as e:  # e.g. the default model's package is not installed
        print(f"structgen {args.command}: error: {e}", file=sys.stderr)
        return EXIT_FAILED
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith("structgen."):
            print(f"structgen {args.command}: error: this build of structgen lacks {e.name} "
                  "(that front-end is not implemented yet)", file=sys.stderr)
            return EXIT_FAILED
        raise
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
